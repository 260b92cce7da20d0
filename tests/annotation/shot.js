// Render a Label Studio task page in headless Chromium and save a full-page screenshot.
// usage: node shot.js URL EMAIL PASSWORD PROJECT TASK OUT.png EXPECTED_TEXT
// Prints one JSON line: whether the expected dialogue text and a loaded image are on the page.
const { chromium } = require(process.env.PLAYWRIGHT_CORE || 'playwright-core');

(async () => {
  const [url, email, password, project, task, out, expected] = process.argv.slice(2);
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium', headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
           '--disable-component-update', '--disable-sync'],
  });
  try {
    const page = await browser.newPage({ viewport: { width: 1500, height: 2300 } });
    await page.goto(`${url}/user/login/`);
    await page.fill('input[name=email]', email);
    await page.fill('input[name=password]', password);
    await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
    await page.goto(`${url}/projects/${project}/data?task=${task}`);
    await page.waitForSelector('[class*="lsf-"]', { timeout: 60000 });
    await page.waitForFunction((text) => document.body.innerText.includes(text), expected, { timeout: 30000 })
      .catch(() => null);
    await page.waitForTimeout(3000);
    const found = await page.evaluate((text) => ({
      dialogue: document.body.innerText.includes(text),
      images_loaded: Array.from(document.images).filter((img) => img.complete && img.naturalWidth > 16).length,
      choices: document.body.innerText.includes('Does answering need the image?'),
    }), expected);
    await page.screenshot({ path: out, fullPage: true });
    console.log(JSON.stringify(found));
  } finally {
    await browser.close();
  }
})().catch((error) => { console.error(error); process.exit(1); });
