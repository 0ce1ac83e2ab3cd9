// page-test: chat-server's live page (GET /) in headless Chromium, as a
// learner would use it (run by `make page-test`; see tools/page.mk).
//
//   node tests/server/page_check.mjs CHROMIUM BUILD MODEL CHAPTER...
//
// For each chapter it starts BUILD/CHAPTER/chat-server on a free port of
// 127.0.0.1 and checks, through the page only: no console error, no failed
// request; a message sent shows its reply streamed in pieces; a user message
// holding HTML shows as those characters (no element made from it); three
// requests sent at once with one system prompt show, while they run, two busy
// slots or more, a block with reference count 2 or more, and a prefix-cache
// node whose text holds the system prompt's words (III.7; III.4 runs one at a
// time and shares nothing); after they end, the pool counts the page shows
// equal GET /v1/kv. Then, with --api-key, the page asks for the key, keeps it
// out of the HTML, and works once given it. Screenshots go to BUILD/page-test/.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';

const [chromium, build, model, ...chapters] = process.argv.slice(2);
if (!chromium || !build || !model || !chapters.length) {
  console.error('usage: node tests/server/page_check.mjs CHROMIUM BUILD MODEL CHAPTER...');
  process.exit(2);
}
const require = createRequire(path.resolve(build, 'node/package.json'));
const puppeteer = require('puppeteer-core');
const XSS = '<img src=x onerror=alert(1)>';
const SYSTEM = 'You are a storyteller. Every story is about a small red fox who lives in the big green forest.';
const shots = path.join(build, 'page-test');
fs.mkdirSync(shots, { recursive: true });

// Starts a chat-server; resolves to {proc, base} once it listens.
function startServer(chapter, extra = []) {
  const bin = path.join(build, chapter, 'chat-server');
  const proc = spawn(bin, ['--bind', '127.0.0.1:0', '--backend', 'scalar', '--threads', '1', '--quiet', ...extra, model],
                     { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  return new Promise((ok, fail) => {
    const timer = setTimeout(() => fail(new Error(`${chapter} chat-server did not start:\n${log}`)), 20000);
    proc.stderr.on('data', (d) => {
      log += d;
      const m = log.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
      if (m) { clearTimeout(timer); ok({ proc, base: `http://127.0.0.1:${m[1]}` }); }
    });
    proc.on('exit', (code) => { clearTimeout(timer); fail(new Error(`${chapter} chat-server exited (${code}):\n${log}`)); });
  });
}

function stopServer(s) {
  return new Promise((ok) => { s.proc.removeAllListeners('exit'); s.proc.on('exit', ok); s.proc.kill('SIGTERM'); });
}

const problems = [];
let checks = 0;
function check(ok, what) {
  checks++;
  if (!ok) problems.push(what);
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
}

async function openPage(browser, base, name, keyed = false) {
  const page = await browser.newPage();
  const bad = (what) => problems.push(`${name}: ${what}`);
  page.on('console', (m) => {
    // with --api-key, the first look at a route answers 401 (then the page asks for the key)
    if (m.type() === 'error' && !(keyed && /status of 401/.test(m.text()))) bad(`console error: ${m.text()}`);
  });
  page.on('pageerror', (e) => bad(`uncaught exception: ${e.message}`));
  page.on('dialog', (d) => { bad(`a dialog opened: ${d.message()}`); d.dismiss(); });
  page.on('requestfailed', (r) => {
    const aborted = r.failure()?.errorText === 'net::ERR_ABORTED' && r.url().endsWith('/v1/events');
    if (!aborted) bad(`request failed: ${r.url()} (${r.failure()?.errorText})`);
  });
  page.on('response', (r) => { if (r.status() >= 400 && r.status() !== 401) bad(`${r.status()} for ${r.url()}`); });
  await page.setViewport({ width: 1400, height: 1000 });
  const res = await page.goto(base + '/', { waitUntil: 'load' });
  check(res && res.ok(), `${name}: GET / answers 200`);
  return page;
}

async function waitReplies(page, count) {
  await page.waitForFunction((c) => [...document.querySelectorAll('.msg.assistant')]
    .filter((m) => m.dataset.done || m.classList.contains('error')).length >= c, { timeout: 60000 }, count);
}

async function runChapter(browser, chapter) {
  const s = await startServer(chapter);
  const name = chapter;
  try {
    const page = await openPage(browser, s.base, name);
    await page.waitForFunction(() => document.getElementById('stream').textContent === 'live', { timeout: 10000 });
    check(true, `${name}: the event stream is live`);

    // one message, streamed; its HTML shows as text
    await page.evaluate(() => {
      window.__updates = 0;
      new MutationObserver(() => { window.__updates++; })
        .observe(document.getElementById('chat'), { subtree: true, childList: true, characterData: true });
    });
    await page.$eval('#max', (e) => { e.value = '40'; });
    await page.$eval('#input', (e, v) => { e.value = v; }, `Tell me about ${XSS}`);
    await page.click('#send');
    await waitReplies(page, 1);
    const one = await page.evaluate(() => {
      const m = document.querySelector('.msg.assistant');
      return { text: m.querySelector('.text').textContent, stats: (m.querySelector('.stats') || {}).textContent || '',
               error: m.classList.contains('error'), updates: window.__updates,
               user: document.querySelector('.msg.user .text').textContent,
               imgs: document.querySelectorAll('#chat img, #tree img').length };
    });
    check(!one.error && one.text.length > 0, `${name}: a message gets a reply (${JSON.stringify(one.text.slice(0, 40))}...)`);
    check(one.updates >= 3, `${name}: the reply arrived in pieces (${one.updates} updates of the chat)`);
    check(/prompt \d+ tokens/.test(one.stats) && /cached \d+/.test(one.stats) && /TTFT \d+ ms/.test(one.stats) &&
          /tokens\/s/.test(one.stats), `${name}: under the reply: ${one.stats}`);
    check(one.user.includes(XSS) && one.imgs === 0, `${name}: the user's HTML shows as text, no element made from it`);

    // three at once, one system prompt: watched on every frame while they run
    await page.click('#clear');
    await page.evaluate(() => {
      window.__seen = { busy: 0, ref: 0, fox: false };
      (function watch() {
        const seen = window.__seen;
        seen.busy = Math.max(seen.busy, document.querySelectorAll('#slots tr.busy').length);
        for (const b of document.querySelectorAll('#pool .blk')) seen.ref = Math.max(seen.ref, Number(b.dataset.ref));
        for (const t of document.querySelectorAll('#tree .node .text')) if (t.textContent.includes('small red fox')) seen.fox = true;
        requestAnimationFrame(watch);
      })();
    });
    await page.$eval('#max', (e) => { e.value = '150'; });
    await page.$eval('#n', (e) => { e.value = '3'; });
    await page.$eval('#input', (e) => { e.value = 'Tell me a long story about the fox and the river.'; });
    await page.click('#sendn');
    await waitReplies(page, 3);
    let seen = await page.evaluate(() => window.__seen);
    const shared = chapter !== 'III.4';
    if (shared && !(seen.busy >= 2 && seen.ref >= 2 && seen.fox)) {
      // a machine too loaded to draw every tick: step back to the tick with the most busy slots
      // and shared blocks, as a learner would with the slider, and look again
      console.log(`     (not seen live: busy ${seen.busy}, ref ${seen.ref}, text ${seen.fox}; stepping back through the ticks)`);
      await page.evaluate(() => {
        let best = -1, score = -1;
        state.history.forEach((snap, i) => {
          if (!snap.slots || !snap.kv) return;
          const busy = snap.slots.slots.filter((x) => x.state === 'busy').length;
          const sc = busy * 100 + Math.min(9, Math.max(0, ...snap.kv.used.map((u) => u.ref)));
          if (sc > score) { score = sc; best = i; }
        });
        state.paused = true;
        state.view = best;
        state.dirty = true;
      });
      await new Promise((ok) => setTimeout(ok, 500));
      seen = await page.evaluate(() => window.__seen);
      await page.click('#pause'); // live again
    }
    if (shared) {
      check(seen.busy >= 2, `${name}: while three ran, the slots showed ${seen.busy} busy at once (>= 2)`);
      check(seen.ref >= 2, `${name}: while three ran, a block showed reference count ${seen.ref} (>= 2)`);
      check(seen.fox, `${name}: a prefix-cache node's text holds the system prompt's words`);
    } else {
      check(seen.busy === 1, `${name}: one request at a time: one busy slot shown (${seen.busy})`);
    }
    await page.screenshot({ path: path.join(shots, `${chapter}-running.png`), fullPage: true });

    // after the end: the counts shown are GET /v1/kv's
    await new Promise((ok) => setTimeout(ok, 2500)); // the page reads the views whole after 1.5 s idle
    const kv = await (await fetch(s.base + '/v1/kv')).json();
    const shown = await page.$$eval('#pool-counts span', (ss) => Object.fromEntries(ss.map((x) => [x.dataset.k, Number(x.dataset.v)])));
    const want = { total: kv.blocks_total, used: kv.blocks_used, cached: kv.blocks_cached || 0, free: kv.blocks_free };
    check(JSON.stringify(shown) === JSON.stringify(want), `${name}: pool counts shown ${JSON.stringify(shown)} = GET /v1/kv ${JSON.stringify(want)}`);
    const cells = await page.$$eval('#pool .blk', (c) => c.length);
    check(cells === kv.blocks_total, `${name}: the grid draws every block (${cells} of ${kv.blocks_total})`);

    // stepping back through the ticks
    const ticks = await page.evaluate(() => Number(document.getElementById('history').max));
    await page.click('#back');
    await page.click('#back');
    const info = await page.$eval('#tickinfo', (e) => e.textContent);
    check(ticks > 10 && /\(2 back\)/.test(info), `${name}: ${ticks + 1} ticks kept; two steps back: "${info}"`);
    await page.screenshot({ path: path.join(shots, `${chapter}.png`), fullPage: true });
    await page.close();
  } finally {
    await stopServer(s);
  }
}

async function runApiKey(browser, chapter) {
  const secret = 'page-test-secret-' + process.pid;
  const s = await startServer(chapter, ['--api-key', secret]);
  const name = `${chapter} --api-key`;
  try {
    const html = await (await fetch(s.base + '/')).text();
    check(!html.includes(secret), `${name}: GET / answers without the key and holds no secret`);
    const page = await openPage(browser, s.base, name, true);
    await page.waitForSelector('#keybox.show', { timeout: 10000 });
    check(true, `${name}: the page asks for the key`);
    await page.type('#key', secret);
    await page.click('#keyform button');
    await page.waitForFunction(() => document.getElementById('stream').textContent === 'live', { timeout: 10000 });
    await page.$eval('#max', (e) => { e.value = '16'; });
    await page.$eval('#input', (e) => { e.value = 'Hello'; });
    await page.click('#send');
    await waitReplies(page, 1);
    const ok = await page.evaluate(() => !document.querySelector('.msg.assistant').classList.contains('error'));
    const stored = await page.evaluate(() => ({ session: sessionStorage.getItem('chat-server-key'), local: localStorage.length }));
    check(ok, `${name}: with the key given, the chat answers`);
    check(stored.session === secret && stored.local === 0, `${name}: the key is kept in the tab only (sessionStorage)`);
    await page.close();
  } finally {
    await stopServer(s);
  }
}

const browser = await puppeteer.launch({ executablePath: chromium, headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
try {
  for (const c of chapters) await runChapter(browser, c);
  await runApiKey(browser, chapters[chapters.length - 1]);
} catch (err) {
  problems.push(`stopped: ${err.stack || err}`);
} finally {
  await browser.close();
}
if (problems.length) {
  console.log(`page-test: ${problems.length} problem(s):\n  ${problems.join('\n  ')}`);
  process.exit(1);
}
console.log(`page-test: ${checks} checks passed; screenshots in ${shots}/`);
