// Drives `hcp-workflow ui` in headless Chromium (Debian's /usr/bin/chromium) the way an
// operator would: open the run list, open the run stuck in unwinding, read why, resolve the
// stuck undo with a note (through the confirmation page), and watch the run reach its end
// state through the page's live refresh. A screenshot is saved after each step.
//
// Usage: node stuck_undo.mjs <base-url> <run-id> <screenshot-dir>
// Exit 0 on success; any failed expectation throws (exit 1) after a last screenshot.
import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

const [base, runId, shots] = process.argv.slice(2);
if (!base || !runId || !shots) {
  console.error('usage: node stuck_undo.mjs <base-url> <run-id> <screenshot-dir>');
  process.exit(2);
}
mkdirSync(shots, { recursive: true });

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-dev-shm-usage'],
});
const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
const problems = [];
page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
page.on('console', (m) => {
  if (m.type() === 'error') problems.push(`console error: ${m.text()}`);
});
let n = 0;
const shot = async (name) => {
  n += 1;
  await page.screenshot({ path: join(shots, `${String(n).padStart(2, '0')}-${name}.png`), fullPage: true });
};
const expect = (cond, what) => {
  if (!cond) throw new Error(`expected: ${what}`);
  console.log(`ok: ${what}`);
};

try {
  // 1. The run list shows the stuck run.
  await page.goto(base + '/');
  const row = page.locator(`tr[data-run="${runId}"]`);
  await row.waitFor({ timeout: 15000 });
  expect((await row.innerText()).includes('needs-operator'), 'the list shows the run as needs-operator');
  const shortId = runId.slice(-8);
  expect((await row.locator('a').first().innerText()).trim() === shortId, `the list shows the distinctive short id ${shortId}`);
  await row.locator('button.copy').click();
  expect((await row.locator('button.copy').getAttribute('data-copied')) === runId, 'the copy button copies the full id');
  await shot('list');

  // 2. Open it: the pending-step card shows the stuck undo, and why says what to do.
  await row.locator('a').first().click();
  await page.waitForURL(`**/runs/${runId}`);
  const pending = await page.locator('#pending').innerText();
  expect(pending.includes('b1') && pending.includes('undo-failed'), 'the pending-step card shows the stuck undo of b1');
  expect(pending.includes('AnotherOperationInProgress'), 'with its error code');
  const failure = page.locator('#failure');
  const ftext = await failure.innerText();
  expect(ftext.includes('Failed') && ftext.includes('c'), `one failure card names the forward failure (${ftext})`);
  expect(ftext.includes('retry') && ftext.includes('--step b1'), 'its hint fits needs-operator: retry or resolve the stuck undo');
  const box = await failure.boundingBox();
  expect(box && box.y < 1000, 'the failure card is above the fold');
  const pbox = await page.locator('#pending').boundingBox();
  expect(pbox && Math.abs(pbox.y - box.y) < 2 && pbox.x < box.x, 'the stuck undo and the failure that started the unwind sit side by side');
  expect((await page.locator('#pending h2').innerText()).startsWith('Stuck undo'), 'the stuck undo is named as such');
  const why = await page.locator('#why').innerText();
  expect(why.includes('stuck while unwinding') && why.includes(`resolve ${runId} --step b1`), 'why explains and names the command');
  expect((await page.locator('#undo-stack').innerText()).includes('stuck'), 'the undo stack marks b1 as stuck');
  expect(await page.locator('svg.gantt rect.bar').count() > 0, 'the timeline has bars');
  await shot('stuck-run');

  // 3. Resolve: the confirmation page explains, asks for a note, and submits.
  await page.locator('a.button[data-action="resolve"]').first().click();
  await page.waitForURL('**/confirm?**');
  expect((await page.locator('main').innerText()).includes('Mark the undo of b1 as done by hand'), 'the confirmation page explains the resolve');
  await page.fill('textarea[name="note"]', 'deleted b1 by hand in the browser test');
  await shot('confirm');
  await page.locator('#confirm').click();
  await page.locator('#outcome').waitFor();
  const outcome = await page.locator('#outcome').innerText();
  expect(outcome.startsWith('Queued'), `the command was queued (${outcome})`);
  await shot('queued');

  // 4. Follow the run: the page refreshes itself until the run is rolled back.
  await page.locator('#back').click();
  await page.waitForURL(`**/runs/${runId}`);
  await page.waitForSelector('#run-body[data-state="rolled-back"]', { timeout: 60000 });
  expect((await page.locator('#run-state').innerText()).trim() === 'rolled-back', 'the run reached rolled-back');
  const colour = await page.locator('#run-state').evaluate((e) => getComputedStyle(e).color);
  expect(colour === 'rgb(178, 106, 0)', `rolled-back is amber, not succeeded's green (${colour})`);
  const fcard = await page.locator('#failure').innerText();
  expect(fcard.includes('start a new run') && !fcard.includes('retry'), 'a rolled-back run keeps its failure card, with no retry hint');
  expect((await page.locator('#commands').innerText()).includes('deleted b1 by hand'), 'the resolution and its note are on the page');
  expect((await page.locator('#undo-stack').innerText()).includes('resolved by'), 'the undo stack shows who resolved b1');
  await shot('rolled-back');

  expect(problems.length === 0, `no page errors (${problems.join('; ')})`);
} catch (e) {
  await shot('failure').catch(() => {});
  console.error(e.message);
  console.error(problems.join('\n'));
  await browser.close();
  process.exit(1);
}
await browser.close();
