// page-shots: screenshots of chat-server's live page (GET /) for the book,
// taken by make book with the headless Chromium book-check uses (tools/book.mk).
//
//   node tools/book/page-shots.mjs CHROMIUM BUILD MODEL OUT_DIR
//
// For III.4 and III.7 it starts BUILD/CHAPTER/chat-server on a free port,
// sends three requests at once that share a system prompt from the page's
// chat (after one short exchange, so that III.7 has the system prompt
// cached), and once they have ended steps the page back to the tick that
// shows the most (busy slots, a shared block, the queue), and saves OUT_DIR/page-CHAPTER.png with the snippet
// OUT_DIR/page-CHAPTER.md that the book's <!-- @figure page-CHAPTER --> lines
// stand for. A shot it cannot take becomes a note that says why
// (.figure-missing[data-failed], which book-check reports).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';

const [chromium, build, model, out] = process.argv.slice(2);
if (!chromium || !build || !model || !out) {
  console.error('usage: node tools/book/page-shots.mjs CHROMIUM BUILD MODEL OUT_DIR');
  process.exit(2);
}
fs.mkdirSync(out, { recursive: true });
const require = createRequire(path.resolve(build, 'node/package.json'));
const puppeteer = require('puppeteer-core');
const WHAT = {
  'III.4': 'III.4 runs one request at a time: the running one holds its blocks (its colour in the grid, its block ' +
           'table below), the other two wait in the queue.',
  'III.7': 'III.7 runs them side by side: the system prompt\'s blocks are shared (x4: three requests and the prefix ' +
           'cache), the slots decode together (B on the timeline), and the prefix cache\'s tree reads as text.',
};

function startServer(chapter) {
  const proc = spawn(path.join(build, chapter, 'chat-server'),
                     ['--bind', '127.0.0.1:0', '--backend', 'scalar', '--threads', '1', '--quiet', model],
                     { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  return new Promise((ok, fail) => {
    const timer = setTimeout(() => fail(new Error(`chat-server did not start: ${log}`)), 20000);
    proc.stderr.on('data', (d) => {
      log += d;
      const m = log.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
      if (m) { clearTimeout(timer); ok({ proc, base: `http://127.0.0.1:${m[1]}` }); }
    });
    proc.on('exit', (code) => { clearTimeout(timer); fail(new Error(`chat-server exited (${code}): ${log}`)); });
  });
}

function snippet(chapter, caption) {
  return `<figure class="shot">\n<img src="figures/page-${chapter}.png" alt="chat-server's live page, ${chapter}" ` +
         `style="width:100%;height:auto;border:1px solid #ddd;border-radius:6px">\n` +
         `<figcaption>${caption}</figcaption>\n</figure>\n`;
}

function missing(chapter, why) {
  const esc = why.replace(/&/g, '&amp;').replace(/</g, '&lt;');
  fs.writeFileSync(path.join(out, `page-${chapter}.md`),
    `<blockquote class="figure-missing" data-figure="page-${chapter}" data-failed="1">\n<p><strong>Screenshot not ` +
    `taken in this build</strong>: ${esc}</p>\n</blockquote>\n`);
  console.error(`book: the page screenshot of ${chapter} failed: ${why}`);
}

async function shoot(browser, chapter) {
  const s = await startServer(chapter);
  try {
    const page = await browser.newPage();
    await page.setViewport({ width: 1400, height: 1000 });
    await page.goto(s.base + '/', { waitUntil: 'load' });
    await page.waitForFunction(() => document.getElementById('stream').textContent === 'live', { timeout: 10000 });
    // one short exchange first: the system prompt's blocks are cached when the three arrive
    await page.$eval('#max', (e) => { e.value = '16'; });
    await page.$eval('#input', (e) => { e.value = 'Hello!'; });
    await page.click('#send');
    await page.waitForFunction(() => document.querySelector('.msg.assistant[data-done]'), { timeout: 60000 });
    await page.click('#clear');
    await page.$eval('#max', (e) => { e.value = '150'; });
    await page.$eval('#n', (e) => { e.value = '3'; });
    await page.$eval('#input', (e) => { e.value = 'Tell me a story about the fox and the river.'; });
    await page.click('#sendn');
    // when all three have ended, step back to the tick that shows the most: the most busy slots,
    // then the most shared block, the most waiting, and each slot some way into its answer
    await page.waitForFunction(() => document.querySelectorAll('.msg.assistant[data-done], .msg.error').length >= 3,
                               { timeout: 120000 });
    const found = await page.evaluate(() => {
      let best = -1, score = -1;
      state.history.forEach((snap, i) => {
        if (!snap.slots || !snap.kv) return;
        const busy = snap.slots.slots.filter((x) => x.state === 'busy');
        const shared = Math.max(0, ...snap.kv.used.map((u) => u.ref));
        const along = busy.length ? Math.min(...busy.map((x) => x.generated || 0)) : 0;
        const sc = busy.length * 10000 + Math.min(shared, 4) * 1000 + (snap.slots.waiting || []).length * 100 + Math.min(along, 40);
        if (sc > score) { score = sc; best = i; }
      });
      if (best < 0) return false;
      state.paused = true;
      document.getElementById('pause').textContent = 'Live';
      state.view = best;
      state.dirty = true;
      return true;
    });
    if (!found) throw new Error('the page kept no tick to show');
    await new Promise((ok) => setTimeout(ok, 300));
    const file = path.join(out, `page-${chapter}.png`);
    await page.screenshot({ path: file, fullPage: true });
    const date = new Date().toISOString().slice(0, 16).replace('T', ' ');
    const cpu = os.cpus()[0]?.model.trim() || 'this machine';
    fs.writeFileSync(path.join(out, `page-${chapter}.md`), snippet(chapter,
      `chat-server's page at <code>GET /</code>, stepped back to a tick while three requests that share a system prompt ran ` +
      `(<code>build/${chapter}/chat-server ${path.basename(model)}</code>, taken by <code>make book</code> on ` +
      `${date} UTC, ${cpu}). ${WHAT[chapter]}`));
    await page.close();
  } finally {
    s.proc.removeAllListeners('exit');
    s.proc.kill('SIGTERM');
  }
}

let browser;
try {
  browser = await puppeteer.launch({ executablePath: chromium, headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
} catch (err) {
  for (const c of ['III.4', 'III.7']) missing(c, `Chromium did not start (${err.message})`);
  process.exit(0);
}
for (const c of ['III.4', 'III.7']) {
  try { await shoot(browser, c); } catch (err) { missing(c, err.message); }
}
await browser.close();
