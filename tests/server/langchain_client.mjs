// LangChain's ChatOpenAI (@langchain/openai), unmodified, against chat-server
// (test_tools.c runs it against a server whose model is scripted):
// bindTools().invoke() returns the model's tool call, whole and streamed.
// usage: node langchain_client.mjs http://127.0.0.1:PORT/v1
import assert from 'node:assert/strict';
import { ChatOpenAI } from '@langchain/openai';

const [baseURL] = process.argv.slice(2);
const llm = new ChatOpenAI({ model: 'scripted', apiKey: 'unused', configuration: { baseURL }, maxRetries: 0 });
const getWeather = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'The weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' }, unit: { type: 'string' } }, required: ['city'] },
  },
};
const withTools = llm.bindTools([getWeather]);

const msg = await withTools.invoke('Weather in Paris?');
assert.equal(msg.tool_calls.length, 1);
assert.equal(msg.tool_calls[0].name, 'get_weather');
assert.deepEqual(msg.tool_calls[0].args, { city: 'Paris', unit: 'celsius' });
assert.match(msg.tool_calls[0].id, /^call_/);
console.log(`ok bindTools().invoke(): ${JSON.stringify(msg.tool_calls)}`);

let gathered;
for await (const chunk of await withTools.stream('Weather in Paris?')) gathered = gathered ? gathered.concat(chunk) : chunk;
assert.equal(gathered.tool_calls.length, 1);
assert.equal(gathered.tool_calls[0].name, 'get_weather');
assert.deepEqual(gathered.tool_calls[0].args, { city: 'Paris', unit: 'celsius' });
console.log('ok bindTools().stream(): the same call from the chunks');
console.log('all ok');
