// One person works through a Label Studio project the way a reviewer does: the login page, the project's
// "Label All Tasks" queue, each task as it comes, Submit, until the queue is empty.
// usage: node review_round.js URL PLAN.json OUT.json
// PLAN: {email, password, project, phase (1 or 2), secrets: [texts this person must never see], shots: {sample id:
//   PNG path}, tasks: {sample id: phase 1: {answers: {natural, correct, needs_image: "yes"|"no"}, deletes: [[t, j]],
//   edits: {field: text}, adds: {t: text}}; phase 2: {choose: {open index: option text}, own: {open index: text}}}}
// OUT: {seen: [sample ids in the order the queue gave them], secrets_seen: [...], tallest_group: px (the highest
//   box of one turn or question), visible: px of the page the editor's pane shows at once, end: last text, ms}
const fs = require('fs');
const { chromium } = require(process.env.PLAYWRIGHT_CORE || 'playwright-core');

const KEYS = { natural: ['1', '2'], correct: ['3', '4'], needs_image: ['5', '6'] };

async function sampleShown(page, previous) {
  // the next task's id from its instructions, or null once the queue says there is nothing left
  const handle = await page.waitForFunction((before) => {
    if (/no more tasks left/i.test(document.body.innerText)) return '<end>'; // falsy would keep waiting
    const help = document.querySelector('.bc-help');
    const match = help && help.innerText.match(/\(id (\S+)\)/);
    if (match && match[1] !== before && document.querySelector('[data-testid="bottombar-submit-button"]')) {
      return match[1];
    }
    return null;
  }, previous, { timeout: 60000, polling: 200 });
  const shown = await handle.jsonValue();
  return shown === '<end>' ? null : shown;
}

async function editText(page, field, text) {
  const row = page.locator('[data-testid="textarea-region"]', { has: page.locator(`[name^="${field}:"]`) });
  await row.locator('[data-testid="htx-textbox-edit-button"]').click();
  await row.locator('textarea').fill(text);
  await row.locator('[data-testid="htx-textbox-save"]').click();
}

async function review(page, task) {
  await page.waitForTimeout(400); // the editor binds its keys after it renders
  for (const [name, answer] of Object.entries(task.answers || {})) {
    await page.keyboard.press(KEYS[name][answer === 'yes' ? 0 : 1]);
  }
  for (const [t, j] of task.deletes || []) {
    await page.locator(`#bc-check-${t}-${j} label`, { hasText: 'delete' }).click();
  }
  for (const [field, text] of Object.entries(task.edits || {})) await editText(page, field, text);
  for (const [t, text] of Object.entries(task.adds || {})) {
    const box = page.locator(`#bc-turn-${t} [placeholder^="A new item"]`);
    for (const line of text.split('\n')) {
      await box.fill(line);
      await box.press('Enter');
    }
  }
}

async function adjudicate(page, task) {
  await page.waitForTimeout(300);
  for (const [index, option] of Object.entries(task.choose || {})) {
    await page.locator(`#bc-open-${index} label`, { hasText: option }).click();
  }
  for (const [index, text] of Object.entries(task.own || {})) {
    const box = page.locator(`#bc-open-${index} textarea`);
    await box.fill(text);
    await box.press('Shift+Enter');
  }
}

(async () => {
  const [url, planPath, outPath] = process.argv.slice(2);
  const plan = JSON.parse(fs.readFileSync(planPath, 'utf8'));
  const started = Date.now();
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium', headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
           '--disable-sync', '--no-first-run'],
  });
  const out = { seen: [], secrets_seen: [], end: '' };
  const page = await browser.newPage({ viewport: { width: 1366, height: 768 } });
  try {
    await page.goto(`${url}/user/login/`);
    await page.fill('input[name=email]', plan.email);
    await page.fill('input[name=password]', plan.password);
    await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
    if (page.url().includes('/user/login')) throw new Error(`login refused for ${plan.email}`);
    await page.goto(`${url}/projects/${plan.project}/data`);
    await page.getByText('Label All Tasks', { exact: false }).first().click();
    let current = null;
    for (;;) {
      current = await sampleShown(page, current);
      if (!current) break;
      out.seen.push(current);
      out.times = out.times || [];
      out.times.push(Date.now() - started);
      const text = await page.evaluate(() => document.body.innerText);
      const fit = await page.evaluate(() => {
        const groups = Array.from(document.querySelectorAll('.bc-group'));
        let pane = groups[0];  // the editor's own scrolling pane: what a screen shows of the page at once
        while (pane && !/(auto|scroll)/.test(getComputedStyle(pane).overflowY)) pane = pane.parentElement;
        return { tallest: Math.max(0, ...groups.map((group) => group.getBoundingClientRect().height)),
                 visible: pane ? pane.clientHeight : window.innerHeight };
      });
      out.tallest_group = Math.max(out.tallest_group || 0, Math.round(fit.tallest));
      out.visible = Math.round(fit.visible);
      out.secrets_seen.push(...(plan.secrets || []).filter((secret) => text.includes(secret)));
      if (plan.shots && plan.shots[current]) {
        await page.getByText('Annotation saved successfully').waitFor({ state: 'hidden', timeout: 10000 })
          .catch(() => null); // the last task's notice is not part of the page
        await page.screenshot({ path: plan.shots[current] });
      }
      const task = (plan.tasks || {})[current] || {};
      if (plan.phase === 2) await adjudicate(page, task); else await review(page, task);
      await page.locator('[data-testid="bottombar-submit-button"]').click();
    }
    out.end = (await page.evaluate(() => document.body.innerText)).slice(0, 300);
  } catch (error) {
    out.error = String(error);
    out.shown = (await page.evaluate(() => document.body.innerText).catch(() => '')).slice(0, 2000);
    if (plan.failure_shot) await page.screenshot({ path: plan.failure_shot }).catch(() => null);
    throw error;
  } finally {
    out.ms = Date.now() - started;
    fs.writeFileSync(outPath, JSON.stringify(out));
    await browser.close();
  }
})().catch((error) => { console.error(error); process.exit(1); });
