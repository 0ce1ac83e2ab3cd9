// Concurrent clients of the official `openai` npm client against chat-servers
// that run many requests at once (III.7): 16 chats in 4 groups that share a
// system prompt, greedy and seeded. Each is first run alone, one after the
// other, on a reference server (one slot, no prefix cache); then all 16
// stream at once from every other server given, and each answer must be its
// solo answer (text and finish reason). On the first of those servers, 4
// chats (one per group) start first; the other 12, sent once those are under
// way, must report the shared system prompt as cached tokens.
// usage: node concurrent_clients.mjs SOLO_URL URL [URL...]
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const [soloURL, ...urls] = process.argv.slice(2);
const client = (baseURL) => new OpenAI({ baseURL, apiKey: 'unused', maxRetries: 0, timeout: 120000 });

const systems = [
  'You are a storyteller for small children. You tell short, happy stories about animals that live in the big green forest near the river, and every story ends well.',
  'You are a patient teacher. You explain things with simple words, one step at a time, and you always give an example that a child could understand at once.',
  'You write poems about the sea. Your poems are short and calm, they speak of waves and boats and the wind, and they never use difficult words.',
  'You are a cook who loves bread. You describe how to bake simple bread at home with flour, water, salt and yeast, and you keep every step very short.',
];
const users = ['Tell me about a fox.', 'What is rain?', 'Write about a boat.', 'How do I start?', 'Tell me about a bear.',
  'Why is the sky blue?', 'Write about the wind.', 'What flour is best?', 'Tell me about a frog.', 'What is a cloud?',
  'Write about a gull.', 'How long does it rest?', 'Tell me about an owl.', 'What is snow?', 'Write about the night.',
  'What oven heat?'];
const chats = users.map((user, i) => ({
  messages: [{ role: 'system', content: systems[i % 4] }, { role: 'user', content: user }],
  max_tokens: 24 + (i * 7) % 25,
  ...(i % 3 === 2 ? { temperature: 0.8, top_p: 0.95, seed: 1000 + i } : { temperature: 0 }),
}));

async function whole(c, chat) {
  const models = await c.models.list();
  const r = await c.chat.completions.create({ model: models.data[0].id, ...chat });
  return { text: r.choices[0].message.content, finish: r.choices[0].finish_reason };
}

async function streamed(c, chat, started) {
  const s = await c.chat.completions.create({ model: 'default', ...chat, stream: true, stream_options: { include_usage: true } });
  let text = '', finish = null, usage = null;
  for await (const chunk of s) {
    if (chunk.usage) usage = chunk.usage;
    for (const ch of chunk.choices) {
      text += ch.delta.content ?? '';
      if (ch.finish_reason) finish = ch.finish_reason;
    }
    if (text && started) started();
  }
  return { text, finish, cached: usage.prompt_tokens_details.cached_tokens, prompt: usage.prompt_tokens };
}

const solo = [];
for (const chat of chats) solo.push(await whole(client(soloURL), chat));
console.log(`solo: ${solo.length} answers, e.g. ${JSON.stringify(solo[0].text.slice(0, 60))}`);

for (const [k, url] of urls.entries()) {
  const c = client(url);
  let answers;
  if (k === 0) {
    // One chat per group first; the rest once each of those has streamed text.
    let started = 0, go;
    const allStarted = new Promise((resolve) => { go = resolve; });
    const first = chats.slice(0, 4).map((chat) => {
      let seen = false;
      return streamed(c, chat, () => { if (!seen) { seen = true; if (++started === 4) go(); } });
    });
    await Promise.race([allStarted, Promise.all(first)]);
    const rest = chats.slice(4).map((chat) => streamed(c, chat));
    answers = await Promise.all([...first, ...rest]);
    for (const [i, a] of answers.entries())
      if (i >= 4) assert.ok(a.cached >= 32, `chat ${i} shares its group's system prompt but reports ${a.cached} cached tokens`);
  } else {
    answers = await Promise.all(chats.map((chat) => streamed(c, chat)));
  }
  for (const [i, a] of answers.entries()) {
    assert.equal(a.text, solo[i].text, `${url}: chat ${i} differs from its solo answer`);
    assert.equal(a.finish, solo[i].finish, `${url}: chat ${i}'s finish_reason`);
  }
  const cached = answers.reduce((n, a) => n + a.cached, 0), prompt = answers.reduce((n, a) => n + a.prompt, 0);
  const hits = answers.filter((a) => a.cached > 0).length;
  console.log(`${url}: 16 streams == solo; ${hits} of 16 hit the prefix cache, ${cached} of ${prompt} prompt tokens cached`);
}
console.log('all ok');
