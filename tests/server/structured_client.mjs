// Structured output and n > 1 through unmodified clients:
//  - LangChain's ChatOpenAI (@langchain/openai): withStructuredOutput with a
//    nested schema at temperature 1 returns a parsed object. The model writes
//    stories; only the constrained sampler can make its reply valid JSON.
//  - the openai client: n = 3, streamed; while it runs, GET /v1/kv shows the
//    prompt's blocks held by the three choices at once; each choice equals the
//    answer of a request alone with the seed seed + index.
// usage: node structured_client.mjs http://127.0.0.1:PORT/v1
import assert from 'node:assert/strict';
import { ChatOpenAI } from '@langchain/openai';
import OpenAI from 'openai';
import { z } from 'zod';

const [baseURL] = process.argv.slice(2);
const step = (what) => console.log(`ok ${what}`);

// ---- withStructuredOutput ----
const Pet = z.object({
  name: z.string().max(16),
  legs: z.number().int(),
  owner: z.object({ name: z.string().max(16), happy: z.boolean() }),
  toys: z.array(z.string().max(12)).max(3),
  kind: z.enum(['cat', 'dog', 'fish']),
});
for (const seed of [1, 2, 3]) {
  const llm = new ChatOpenAI({
    model: 'default', apiKey: 'unused', temperature: 1, maxTokens: 220, maxRetries: 0,
    configuration: { baseURL }, modelKwargs: { seed },
  });
  const structured = llm.withStructuredOutput(Pet, { name: 'pet', method: 'jsonSchema', strict: true });
  const pet = await structured.invoke('Tell me about a pet.');
  assert.deepEqual(Pet.parse(pet), pet);
  assert.equal(typeof pet.owner, 'object');
  step(`withStructuredOutput (seed ${seed}): ${JSON.stringify(pet)}`);
}

// A plain json_object request through the openai client parses too.
const plain = new OpenAI({ baseURL, apiKey: 'unused', maxRetries: 0, timeout: 60000 });
const obj = await plain.chat.completions.create({
  model: 'default', messages: [{ role: 'user', content: 'Once upon a time' }], max_tokens: 220, temperature: 1,
  response_format: { type: 'json_object' }, seed: 4,
});
if (obj.choices[0].finish_reason === 'stop') assert.equal(typeof JSON.parse(obj.choices[0].message.content), 'object');
step(`response_format json_object: ${obj.choices[0].message.content.slice(0, 60)} (${obj.choices[0].finish_reason})`);

// ---- n = 3 ----
const client = new OpenAI({ baseURL, apiKey: 'unused', maxRetries: 0, timeout: 120000 });
const kvURL = baseURL.replace(/\/v1$/, '/v1/kv');
const messages = [{ role: 'user', content: 'Write a story about a dog' }];
const ask = { model: 'default', messages, max_tokens: 60, temperature: 1, seed: 5 };
const stream = await client.chat.completions.create({ ...ask, n: 3, stream: true });
const texts = ['', '', ''], finish = [null, null, null];
let maxRef = 0;
for await (const chunk of stream) {
  for (const c of chunk.choices) {
    texts[c.index] += c.delta.content ?? '';
    if (c.finish_reason) finish[c.index] = c.finish_reason;
  }
  if (maxRef < 3 && texts.some((t) => t.length)) {   // mid-request: who holds the prompt's blocks?
    const kv = await (await fetch(kvURL)).json();
    maxRef = Math.max(maxRef, ...kv.used.map((b) => b.ref));
  }
}
assert.ok(maxRef >= 3, `a block of the prompt held by the 3 choices at once (largest reference count ${maxRef})`);
assert.ok(finish.every((f) => f === 'stop' || f === 'length'));
step(`n = 3 streamed: blocks shared (reference count up to ${maxRef}), ${JSON.stringify(texts)}`);

const whole = await client.chat.completions.create({ ...ask, n: 3 });
assert.equal(whole.choices.length, 3);
whole.choices.forEach((c, i) => assert.equal(c.index, i));
assert.deepEqual(whole.choices.map((c) => c.message.content), texts, 'streamed == whole');
let generated = 0;
for (let i = 0; i < 3; i++) {
  const solo = await client.chat.completions.create({ ...ask, seed: ask.seed + i });
  assert.equal(solo.choices[0].message.content, texts[i], `choice ${i} == the answer alone with seed ${ask.seed + i}`);
  assert.equal(whole.usage.prompt_tokens, solo.usage.prompt_tokens, 'usage counts the prompt once');
  generated += solo.usage.completion_tokens;
}
assert.equal(whole.usage.completion_tokens, generated, 'usage counts every choice\'s tokens');
assert.equal(whole.usage.total_tokens, whole.usage.prompt_tokens + generated);
step('n = 3: each choice equals the answer alone with seed + index');
console.log('all ok');
