// Open the HTML run report from the file system in headless Chromium, as a curator would, and say what it shows.
// usage: node report_page.js REPORT_FOLDER SHOT_FOLDER
// Prints one JSON line: console errors, the funnel's numbers, the near-duplicate group's loaded pictures, and the
// samples shown before and after choosing a category; writes a screenshot of each section into SHOT_FOLDER.
const { chromium } = require(process.env.PLAYWRIGHT_CORE || 'playwright-core');
const path = require('path');

(async () => {
  const [folder, shots] = process.argv.slice(2);
  const url = (name) => 'file://' + path.join(folder, name);
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium', headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
           '--disable-component-update', '--disable-sync'],
  });
  const errors = [];
  const requests = [];
  try {
    const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    page.on('console', (message) => { if (message.type() === 'error') errors.push(message.text()); });
    page.on('pageerror', (error) => errors.push(String(error)));
    page.on('request', (request) => { if (!request.url().startsWith('file://')) requests.push(request.url()); });
    const started = Date.now();
    await page.goto(url('index.html'), { waitUntil: 'load' });
    const loadMs = Date.now() - started;
    const funnel = await page.$$eval('table.funnel tbody tr', (rows) => rows.map((row) => ({
      stage: row.getAttribute('data-stage'),
      in: Number(row.querySelector('[data-field=in]').textContent),
      removed: Number(row.querySelector('[data-field=removed]').textContent),
      out: Number(row.querySelector('[data-field=out]').textContent),
    })));
    for (const section of ['funnel', 'labels', 'selection', 'costs', 'review']) {
      await (await page.$('#' + section)).screenshot({ path: path.join(shots, `report_${section}.png`) });
    }
    await page.goto(url('groups-1.html'), { waitUntil: 'load' });
    const group = await page.$eval('section.group', (node) => ({
      pictures: Array.from(node.querySelectorAll('img')).filter((img) => img.complete && img.naturalWidth > 8).length,
      keptFirst: node.firstElementChild.classList.contains('kept'),
    }));
    await page.screenshot({ path: path.join(shots, 'report_groups.png') });
    const dropLink = await page.goto(url('index.html')).then(() => page.$eval('table.funnel a', (a) => a.getAttribute('href')));
    await page.goto(url(dropLink), { waitUntil: 'load' });
    const dropCards = await page.$$eval('.card', (cards) => cards.length);
    await page.screenshot({ path: path.join(shots, 'report_drops.png') });
    await page.goto(url('samples-1.html'), { waitUntil: 'load' });
    // every thumbnail drawn with its own proportions (a flex row once stretched landscape ones to its height)
    const shapes = () => page.$$eval('img', (images) => images.filter((img) => img.complete && img.naturalWidth > 0)
      .map((img) => ({ src: img.getAttribute('src'), natural: img.naturalWidth / img.naturalHeight,
                       drawn: img.clientWidth / img.clientHeight })));
    const thumbnails = [...await shapes()];
    await page.goto(url(dropLink), { waitUntil: 'load' });
    thumbnails.push(...await shapes());
    await page.goto(url('groups-1.html'), { waitUntil: 'load' });
    thumbnails.push(...await shapes());
    await page.goto(url('samples-1.html'), { waitUntil: 'load' });
    const distorted = thumbnails.filter((shape) => Math.abs(shape.drawn - shape.natural) > 0.03 * shape.natural);
    const landscape = thumbnails.filter((shape) => shape.natural > 1.3).length;
    const visible = () => page.$$eval('.sample', (nodes) => nodes.filter((node) => !node.hidden).length);
    const before = await visible();
    const choice = await page.$eval('select[data-filter=category]', (select) => select.options[1].value);
    await page.selectOption('select[data-filter=category]', choice);
    const after = await visible();
    const matching = await page.$$eval('.sample', (nodes, value) => nodes.filter((node) => !node.hidden)
      .every((node) => node.getAttribute('data-category') === value), choice);
    const shownText = await page.$eval('#shown', (node) => node.textContent);
    const elsewhere = await page.$eval('#elsewhere', (node) => node.textContent);
    await page.goto('about:blank');
    await page.goto(url('samples-1.html') + '#category=' + encodeURIComponent(choice), { waitUntil: 'load' });
    const afterLink = await visible();
    await page.screenshot({ path: path.join(shots, 'report_samples.png') });
    await page.keyboard.press('Tab');
    const focused = await page.evaluate(() => document.activeElement && document.activeElement.textContent.trim());
    const missingAlt = await page.$$eval('img', (images) => images.filter((img) => !img.alt).length);
    console.log(JSON.stringify({ errors, requests, loadMs, funnel, group, dropLink, dropCards, before, after,
                                 choice, matching, shownText, elsewhere, afterLink, focused, missingAlt,
                                 thumbnails: thumbnails.length, landscape, distorted }));
  } finally {
    await browser.close();
  }
})().catch((error) => { console.error(error); process.exit(1); });
