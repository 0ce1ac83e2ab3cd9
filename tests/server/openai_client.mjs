// The official `openai` npm client, unmodified, against chat-server: models,
// chat completions whole and streamed (the same text at temperature 0),
// completions, usage, stop strings, seeds and errors.
// usage: node openai_client.mjs http://127.0.0.1:PORT/v1 [API_KEY]
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const [baseURL, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: apiKey ?? 'unused', maxRetries: 0, timeout: 60000 });
const step = (what) => console.log(`ok ${what}`);

if (apiKey) {
  const wrong = new OpenAI({ baseURL, apiKey: 'wrong-key', maxRetries: 0 });
  await assert.rejects(wrong.models.list(), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
  step('a wrong API key gets 401');
}

const models = await client.models.list();
assert.equal(models.data.length, 1);
const model = models.data[0].id;
assert.equal(models.data[0].object, 'model');
step(`models.list: ${model}`);

const messages = [
  { role: 'system', content: 'You tell stories.' },
  { role: 'user', content: 'Once upon a time' },
];
const whole = await client.chat.completions.create({ model, messages, max_tokens: 24, temperature: 0 });
assert.equal(whole.object, 'chat.completion');
assert.equal(whole.model, model);
assert.match(whole.id, /^chatcmpl-/);
assert.equal(whole.choices.length, 1);
const answer = whole.choices[0].message;
assert.equal(answer.role, 'assistant');
assert.equal(typeof answer.content, 'string');
assert.ok(['stop', 'length'].includes(whole.choices[0].finish_reason));
const usage = whole.usage;
assert.ok(usage.prompt_tokens > 0);
assert.ok(usage.completion_tokens > 0 && usage.completion_tokens <= 24);
assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens);
assert.equal(usage.prompt_tokens_details.cached_tokens, 0);
assert.ok(whole.timings.prompt_n > 0 && whole.timings.predicted_n === usage.completion_tokens);
step(`chat.completions.create: ${JSON.stringify(answer.content)} (${whole.choices[0].finish_reason}, ${JSON.stringify(usage)})`);

const stream = await client.chat.completions.create({
  model, messages, max_tokens: 24, temperature: 0, stream: true, stream_options: { include_usage: true },
});
let text = '', finish = null, streamedUsage = null, chunks = 0, role = null;
for await (const chunk of stream) {
  assert.equal(chunk.object, 'chat.completion.chunk');
  if (chunk.usage) streamedUsage = chunk.usage;
  for (const c of chunk.choices) {
    role ??= c.delta.role;
    text += c.delta.content ?? '';
    if (c.finish_reason) finish = c.finish_reason;
  }
  chunks++;
}
assert.equal(role, 'assistant');
assert.equal(text, answer.content, 'streamed text == whole text at temperature 0');
assert.equal(finish, whole.choices[0].finish_reason);
assert.equal(streamedUsage.prompt_tokens, usage.prompt_tokens);
assert.equal(streamedUsage.completion_tokens, usage.completion_tokens);
step(`streamed chat in ${chunks} chunks == whole, usage in the last chunk`);

const prompt = 'Once upon a time';
const comp = await client.completions.create({ model, prompt, max_tokens: 16, temperature: 0 });
assert.equal(comp.object, 'text_completion');
const ctext = comp.choices[0].text;
assert.ok(ctext.length > 0);
assert.ok(comp.usage.completion_tokens <= 16);
assert.equal(comp.choices[0].finish_reason, comp.usage.completion_tokens === 16 ? 'length' : 'stop');
let streamedText = '';
for await (const chunk of await client.completions.create({ model, prompt, max_tokens: 16, temperature: 0, stream: true }))
  streamedText += chunk.choices[0]?.text ?? '';
assert.equal(streamedText, ctext);
step(`completions.create: ${JSON.stringify(ctext)}, streamed the same`);

const stop = ctext.slice(4, 9);
const stopped = await client.completions.create({ model, prompt, max_tokens: 16, temperature: 0, stop: [stop, 'zzzz'] });
assert.equal(stopped.choices[0].text, ctext.slice(0, ctext.indexOf(stop)));
assert.equal(stopped.choices[0].finish_reason, 'stop');
step(`stop ${JSON.stringify(stop)}: ${JSON.stringify(stopped.choices[0].text)}`);

const sampled = async () =>
  (await client.chat.completions.create({ model, messages, max_tokens: 16, temperature: 0.9, top_p: 0.95, seed: 42 }))
    .choices[0].message.content;
assert.equal(await sampled(), await sampled());
step('the same seed gives the same sampled text');

const withLogprobs = await client.chat.completions.create({
  model, messages, max_tokens: 4, temperature: 0, logprobs: true, top_logprobs: 3,
});
const lp = withLogprobs.choices[0].logprobs.content;
assert.equal(lp.length, withLogprobs.usage.completion_tokens);
assert.ok(lp.every((t) => t.logprob <= 0 && t.top_logprobs.length === 3 && t.top_logprobs[0].logprob >= t.logprob));
step('logprobs with top_logprobs');

await assert.rejects(
  client.chat.completions.create({ model, messages, n: 17 }),
  (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === 'n' && /from 1 to 16/.test(e.message),
);
await assert.rejects(
  client.chat.completions.create({ model, messages: [] }),
  (e) => e instanceof OpenAI.BadRequestError && e.param === 'messages',
);
await assert.rejects(
  client.completions.create({ model, prompt: 'x '.repeat(5000), max_tokens: 4 }),
  (e) => e instanceof OpenAI.BadRequestError && /context holds \d+|the pool has \d+/.test(e.message),
);
step('errors arrive as BadRequestError with their param');
console.log('all ok');
