// The official `openai` npm client, unmodified, through a tool loop against
// chat-server (test_tools.c runs it against a server whose model is scripted):
// the call, the tool's result, the final answer; whole and streamed; forced
// calls; bad tools; models.retrieve.
// usage: node tools_client.mjs http://127.0.0.1:PORT/v1
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const [baseURL] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: 'unused', maxRetries: 0, timeout: 60000 });
const step = (what) => console.log(`ok ${what}`);

const model = (await client.models.list()).data[0].id;
const retrieved = await client.models.retrieve(model);
assert.equal(retrieved.id, model);
await assert.rejects(client.models.retrieve('no-such-model'), (e) => e instanceof OpenAI.NotFoundError);
step('models.retrieve: the model, and 404 for another');

const tools = [{
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'The weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' }, unit: { enum: ['celsius', 'fahrenheit'] } }, required: ['city'] },
  },
}];
const weather = (args) => JSON.stringify({ city: args.city, temp: 21 });

// Whole replies.
const messages = [{ role: 'user', content: 'Weather in Paris?' }];
const first = await client.chat.completions.create({ model, messages, tools });
const choice = first.choices[0];
assert.equal(choice.finish_reason, 'tool_calls');
assert.equal(choice.message.content, null);
assert.equal(choice.message.tool_calls.length, 1);
const call = choice.message.tool_calls[0];
assert.equal(call.type, 'function');
assert.equal(call.function.name, 'get_weather');
assert.deepEqual(JSON.parse(call.function.arguments), { city: 'Paris', unit: 'celsius' });
assert.match(call.id, /^call_/);
step(`a call: ${call.function.name}(${call.function.arguments}) id ${call.id}`);

messages.push(choice.message);
messages.push({ role: 'tool', tool_call_id: call.id, content: weather(JSON.parse(call.function.arguments)) });
const final = await client.chat.completions.create({ model, messages, tools });
assert.equal(final.choices[0].finish_reason, 'stop');
assert.equal(final.choices[0].message.content, 'It is 21 °C in Paris.');
assert.equal(final.choices[0].message.tool_calls, undefined);
step(`the final answer after the tool's result: ${JSON.stringify(final.choices[0].message.content)}`);

// Streamed, assembled by the client's own stream helper.
const runner = client.chat.completions.stream({ model, messages: messages.slice(0, 1), tools });
const streamed = await runner.finalChatCompletion();
const scall = streamed.choices[0].message.tool_calls[0];
assert.equal(streamed.choices[0].finish_reason, 'tool_calls');
assert.equal(scall.function.name, 'get_weather');
assert.equal(scall.function.arguments, call.function.arguments);
assert.match(scall.id, /^call_/);
const streamMessages = [messages[0], streamed.choices[0].message,
  { role: 'tool', tool_call_id: scall.id, content: weather(JSON.parse(scall.function.arguments)) }];
let text = '', finish = null;
for await (const chunk of await client.chat.completions.create({ model, messages: streamMessages, tools, stream: true })) {
  text += chunk.choices[0]?.delta?.content ?? '';
  finish = chunk.choices[0]?.finish_reason ?? finish;
}
assert.equal(text, 'It is 21 °C in Paris.');
assert.equal(finish, 'stop');
step('the same loop streamed (delta.tool_calls assembled by the client)');

// Forced calls.
for (const tool_choice of ['required', { type: 'function', function: { name: 'get_weather' } }]) {
  const forced = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'Hello' }], tools, tool_choice });
  assert.equal(forced.choices[0].message.tool_calls?.[0]?.function?.name, 'get_weather');
}
step('tool_choice required and a named function give a call');

// Bad tools: 400 naming the field.
await assert.rejects(client.chat.completions.create({ model, messages, tools: 'garbage', tool_choice: 'required' }),
  (e) => e instanceof OpenAI.BadRequestError && e.param === 'tools');
await assert.rejects(client.chat.completions.create({ model, messages, tools, tool_choice: { type: 'function', function: { name: 'nope' } } }),
  (e) => e instanceof OpenAI.BadRequestError && e.param === 'tool_choice');
step('bad tools and an unknown function: 400 naming the field');
console.log('all ok');
