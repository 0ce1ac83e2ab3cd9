// book-check: loads every page of the built book in headless Chromium, as a
// reader would, and fails on what a reader would see broken (run by
// `make book-check`; see tools/book.mk).
//
//   node tools/book/check.mjs BOOK_DIR CHROMIUM
//
// The pages are served over HTTP on 127.0.0.1 (a free port) from the
// repository's root, so that links from the book to the code resolve too. For
// every BOOK_DIR/*.html it fails on: a console error or an uncaught exception;
// a request that fails or answers 4xx/5xx; an image that did not load; an
// internal link to a file that does not exist or to an anchor the target page
// lacks; a section (h2-h4) with nothing under it before the next heading; a
// figure (figure.plot) whose SVG has no plotted data or whose caption does not
// say the machine, the model and the date; a figure whose measurement failed
// (the note tools/book/figures.c writes instead: .figure-missing[data-failed]).
// It saves a screenshot of each page, desktop width and phone width, in
// BOOK_DIR/shots/.
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { createRequire } from 'node:module';

const [bookDir, chromium] = process.argv.slice(2);
if (!bookDir || !chromium) {
  console.error('usage: node tools/book/check.mjs BOOK_DIR CHROMIUM');
  process.exit(2);
}
const require = createRequire(path.resolve('build/node/package.json'));
const puppeteer = require('puppeteer-core');
const root = process.cwd();
const types = { '.html': 'text/html', '.css': 'text/css', '.svg': 'image/svg+xml', '.png': 'image/png',
                '.md': 'text/plain', '.c': 'text/plain', '.h': 'text/plain' };

// A static server of the repository: GET only, nothing outside it.
const server = http.createServer((req, res) => {
  const url = decodeURIComponent(new URL(req.url, 'http://x').pathname);
  const file = path.join(root, url);
  if (!file.startsWith(root) || !fs.existsSync(file) || fs.statSync(file).isDirectory()) {
    res.writeHead(404).end('not found');
    return;
  }
  res.writeHead(200, { 'content-type': types[path.extname(file)] || 'application/octet-stream' });
  fs.createReadStream(file).pipe(res);
});
await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
const base = `http://127.0.0.1:${server.address().port}`;
const bookUrl = `${base}/${path.relative(root, path.resolve(bookDir))}/`;

const pages = fs.readdirSync(bookDir).filter((f) => f.endsWith('.html')).sort();
const shots = path.join(bookDir, 'shots');
fs.mkdirSync(shots, { recursive: true });
const problems = [];
const idsOf = new Map(); // url without anchor -> Set of ids, for the anchors links ask for

const browser = await puppeteer.launch({
  executablePath: chromium, headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
});
const links = []; // [page, href]
try {
  for (const name of pages) {
    const page = await browser.newPage();
    const bad = (what) => problems.push(`${name}: ${what}`);
    page.on('console', (m) => { if (m.type() === 'error') bad(`console error: ${m.text()}`); });
    page.on('pageerror', (e) => bad(`uncaught exception: ${e.message}`));
    page.on('requestfailed', (r) => bad(`request failed: ${r.url()} (${r.failure()?.errorText})`));
    page.on('response', (r) => { if (r.status() >= 400) bad(`${r.status()} for ${r.url()}`); });
    await page.setViewport({ width: 1280, height: 900 });
    const res = await page.goto(bookUrl + name, { waitUntil: 'load' });
    if (!res || !res.ok()) bad(`the page did not load (${res && res.status()})`);
    const found = await page.evaluate(async () => {
      const out = { ids: [], links: [], images: [], empty: [], figures: [], failed: [] };
      out.ids = [...document.querySelectorAll('[id]')].map((e) => e.id);
      out.links = [...document.querySelectorAll('a[href]')].map((a) => a.href);
      out.images = [...document.querySelectorAll('img')]
        .filter((i) => !i.complete || i.naturalWidth === 0).map((i) => i.getAttribute('src'));
      // a heading with no content before the next heading of its level or above
      const hs = [...document.querySelectorAll('main h2, main h3, main h4')]
        .filter((h) => !h.closest('.toc'));
      for (const h of hs) {
        let n = h.nextElementSibling, content = false;
        while (n && !/^H[1-6]$/.test(n.tagName)) { if (n.textContent.trim() || n.querySelector('img,svg')) content = true; n = n.nextElementSibling; }
        const nextLevel = n ? Number(n.tagName[1]) : 0;
        if (!content && !(nextLevel > Number(h.tagName[1]))) out.empty.push(h.textContent.trim());
      }
      out.failed = [...document.querySelectorAll('.figure-missing[data-failed]')].map((e) => e.dataset.figure);
      // a code block (in main, not a diff's side-by-side table) wider than its box: a line cut at the edge
      out.cut = [...document.querySelectorAll('main pre')].filter((p) => p.scrollWidth > p.clientWidth + 1)
        .map((p) => (p.textContent.split('\n').find((l) => l.length > 80) || p.textContent).trim().slice(0, 60));
      for (const f of document.querySelectorAll('figure.plot')) {
        const img = f.querySelector('img'), cap = f.querySelector('figcaption');
        const svg = img ? await (await fetch(img.src)).text() : '';
        // gnuplot draws each data series as a group gnuplot_plot_N with a path or rects in it
        const series = (svg.match(/<g id="gnuplot_plot_\d+[a-z]?"/g) || []).length;
        const drawn = (svg.match(/<path [^>]*d=['"]M[^'"]*L/g) || []).length;
        out.figures.push({ src: img && img.getAttribute('src'), points: Number(f.dataset.points || 0), series, drawn,
                           caption: cap ? cap.textContent : '' });
      }
      return out;
    });
    idsOf.set(page.url().split('#')[0], new Set(found.ids));
    for (const l of found.links) links.push([name, l]);
    for (const s of found.images) bad(`an image did not load: ${s}`);
    for (const h of found.empty) bad(`an empty section: "${h}"`);
    for (const f of found.failed) bad(`a figure whose measurement failed: ${f} (see make book's output)`);
    for (const c of found.cut) bad(`a code block whose lines are cut at 1280 px (wrap them): "${c}..."`);
    for (const f of found.figures) {
      if (f.points <= 0 || f.series === 0 || f.drawn === 0) bad(`a figure with no data: ${f.src}`);
      if (!/\son\s[\s\S]+\d{4}-\d\d-\d\d/.test(f.caption) || !/model|make bench/.test(f.caption))
        bad(`a figure's caption does not say the machine, the model and the date: ${f.src}`);
    }
    await page.screenshot({ path: path.join(shots, name.replace(/\.html$/, '.png')), fullPage: true });
    await page.setViewport({ width: 390, height: 844, isMobile: true });
    await page.screenshot({ path: path.join(shots, name.replace(/\.html$/, '.phone.png')) });
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    if (overflow > 2) bad(`wider than a phone's screen by ${overflow}px`);
    await page.close();
  }
  // Internal links: the file exists, and the anchor is an id of the target page.
  for (const [from, href] of links) {
    if (!href.startsWith(base)) continue;
    const [url, anchor] = href.split('#');
    const file = path.join(root, decodeURIComponent(new URL(url).pathname));
    if (!fs.existsSync(file)) { problems.push(`${from}: a broken link to ${href.slice(base.length)}`); continue; }
    if (!anchor || !url.endsWith('.html')) continue;
    if (!idsOf.has(url)) {
      const html = fs.readFileSync(file, 'utf8');
      idsOf.set(url, new Set([...html.matchAll(/ id="([^"]*)"/g)].map((m) => m[1])));
    }
    if (!idsOf.get(url).has(decodeURIComponent(anchor)))
      problems.push(`${from}: a link to a missing anchor: ${href.slice(base.length)}`);
  }
} finally {
  await browser.close();
  server.close();
}
for (const p of problems) console.error(`book-check: ${p}`);
console.log(`book-check: ${pages.length} pages, ${links.length} links, ${problems.length} problem(s); screenshots in ${shots}`);
process.exit(problems.length ? 1 : 0);
