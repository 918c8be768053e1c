// Drives `hcp-workflow ui` in headless Chromium (Debian's /usr/bin/chromium) the way an
// operator would: open the run list (state counts, search), look at a run in each state,
// open the run stuck in unwinding, read why, resolve the stuck undo with a note (through the
// confirmation page), and watch the run reach its end state through the page's live
// refresh. Every state is screenshotted at 1400 px and at 420 px (where the page must not
// scroll sideways); the paths are printed.
//
// Usage: node stuck_undo.mjs <base-url> <run-id> <screenshot-dir> [<other runs as JSON>]
//   other runs: {"succeeded": id, "rolledBack": id, "waiting": id, "paused": id} (each
//   optional; `paused`: a run paused past a pivot, issue 23)
// Exit 0 on success; any failed expectation throws (exit 1) after a last screenshot.
import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

const [base, runId, shots, othersJson] = process.argv.slice(2);
if (!base || !runId || !shots) {
  console.error('usage: node stuck_undo.mjs <base-url> <run-id> <screenshot-dir> [<other runs JSON>]');
  process.exit(2);
}
const others = othersJson ? JSON.parse(othersJson) : {};
mkdirSync(shots, { recursive: true });

const WIDE = { width: 1400, height: 1000 };
const NARROW = { width: 420, height: 900 };
const RED = 'rgb(198, 40, 40)';
const GREEN = 'rgb(46, 125, 50)';
const AMBER = 'rgb(178, 106, 0)';

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-dev-shm-usage'],
});
const page = await browser.newPage({ viewport: WIDE });
const problems = [];
page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
page.on('console', (m) => {
  if (m.type() === 'error') problems.push(`console error: ${m.text()}`);
});
let n = 0;
const saved = [];
const save = async (name, opts = {}) => {
  n += 1;
  const path = join(shots, `${String(n).padStart(2, '0')}-${name}.png`);
  await page.screenshot({ path, fullPage: true, ...opts });
  saved.push(path);
  console.log(`screenshot: ${path}`);
};
const expect = (cond, what) => {
  if (!cond) throw new Error(`expected: ${what}`);
  console.log(`ok: ${what}`);
};
const noSidewaysScroll = async (what) => {
  const [sw, iw] = await page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
  expect(sw <= iw, `${what} at 420 px does not scroll sideways (scrollWidth ${sw} <= innerWidth ${iw})`);
};
// The page as it is at 1400 px, then at 420 px (checked for sideways scroll), then back.
const shotBoth = async (name) => {
  await save(`${name}-1400`);
  await page.setViewportSize(NARROW);
  await page.waitForTimeout(150);
  await noSidewaysScroll(name);
  await save(`${name}-420`);
  await page.setViewportSize(WIDE);
  await page.waitForTimeout(100);
};
// The list refreshes itself (htmx swaps the table every 2 s): a check that caught an
// element just swapped out is asked again.
const settled = async (check) => {
  for (let i = 0; i < 10; i++) {
    try {
      const v = await check();
      if (v) return v;
    } catch (e) { /* detached mid-check */ }
    await page.waitForTimeout(150);
  }
  return check();
};
const colourOf = (sel) => page.locator(sel).first().evaluate((e) => getComputedStyle(e).color);
const openRun = async (id) => {
  await page.goto(`${base}/runs/${id}`);
  await page.locator('#run-state').waitFor();
};

// The timeline: labels in their own column, round ticks, a total, zoom that works.
const checkTimeline = async (what) => {
  const svg = page.locator('svg.gantt');
  const x0 = parseFloat(await svg.getAttribute('data-x0'));
  const geo = await svg.evaluate((s) => ({
    labels: [...s.querySelectorAll('text.label')].map((t) => { const b = t.getBBox(); return b.x + b.width; }),
    bars: [...s.querySelectorAll('rect.bar')].map((r) => r.x.baseVal.value),
    ticks: [...s.querySelectorAll('text.tick')].map((t) => t.textContent.trim()),
  }));
  expect(geo.bars.length > 0, `${what}: the timeline has bars`);
  expect(geo.labels.every((r) => r <= x0) && geo.bars.every((x) => x >= x0), `${what}: step labels end left of every bar (label column ${x0})`);
  expect(geo.ticks.length >= 2 && geo.ticks.every((t) => /^(0|\+(\d+(\.\d+)?(ms|s|m|h|d))+)$/.test(t)), `${what}: round axis ticks (${geo.ticks.join(' ')})`);
  expect(/\d/.test(await page.locator('#timeline-total').innerText()), `${what}: the timeline header shows the total duration`);
};

try {
  // 1. The run list: counts per state, short ids on one line, a short blocked-on cell.
  await page.goto(base + '/');
  const row = page.locator(`tr[data-run="${runId}"]`);
  await row.waitFor({ timeout: 15000 });
  expect(await settled(async () => (await row.innerText()).includes('needs-operator')), 'the list shows the run as needs-operator');
  const shortId = runId.slice(-8);
  const idLink = row.locator('td.runid a');
  expect(await settled(async () => (await idLink.innerText()).trim() === shortId), `the list shows the distinctive short id ${shortId}`);
  const counts = page.locator('#state-counts');
  const countText = (await counts.innerText()).replace(/\s+/g, ' ');
  const needsOperator = others.paused ? 2 : 1;
  expect(countText.includes(`needs-operator ${needsOperator}`), `state counts at the top (${countText})`);
  for (const [key, state] of [['succeeded', 'succeeded'], ['rolledBack', 'rolled-back'], ['waiting', 'waiting']]) {
    if (others[key]) expect(countText.includes(`${state} 1`), `the ${state} run is counted`);
  }
  expect(await settled(async () => (await counts.locator('a[data-state="needs-operator"]').evaluate((e) => getComputedStyle(e).color)) === RED), 'the needs-operator count is red');
  expect(await settled(async () => {
    await row.locator('button.copy').click();
    // The clipboard write resolves later: wait for the button to say it copied.
    await row.locator('button.copy[data-copied]').waitFor({ timeout: 5000 }).catch(() => {});
    return (await row.locator('button.copy').getAttribute('data-copied')) === runId;
  }), 'the copy button copies the full id');
  const clip = row.locator('td.blocked .clip');
  expect(await settled(async () => { const full = await clip.getAttribute('title'); return full && full.length > 0 && (await clip.innerText()).trim() === full.trim(); }), 'the blocked-on cell carries its full text as a tooltip');
  expect(await settled(async () => (await clip.evaluate((e) => getComputedStyle(e).whiteSpace)) === 'nowrap'), 'the blocked-on cell is one line');
  const oneLine = async (loc) => loc.evaluate((e) => e.getClientRects().length === 1 && e.getBoundingClientRect().height < 24);
  expect(await settled(() => oneLine(idLink)), 'the short id does not wrap');
  await clip.click();
  expect(await settled(async () => (await clip.getAttribute('class')).includes('open')), 'a click expands the blocked-on cell');
  await page.waitForTimeout(2500);
  expect((await clip.getAttribute('class')).includes('open'), 'and it stays expanded across the live refresh');
  await clip.click();
  await shotBoth('list');
  await page.setViewportSize(NARROW);
  expect(await settled(() => oneLine(page.locator(`tr[data-run="${runId}"] td.runid a`))), 'the short id does not wrap at 420 px');
  await page.setViewportSize(WIDE);

  // Each count is a link filtering by its state.
  await counts.locator('a[data-state="needs-operator"]').click();
  await page.waitForURL('**/?state=needs-operator**');
  expect(await page.locator('tbody tr').count() === needsOperator && await page.locator(`tr[data-run="${runId}"]`).count() === 1, 'the needs-operator count filters the list to the runs that wait for an operator');

  // Search finds terminal runs by failed step and error code.
  if (others.rolledBack) {
    await page.goto(`${base}/?q=${encodeURIComponent('InvalidParameter d')}`);
    expect(await page.locator(`tr[data-run="${others.rolledBack}"]`).count() === 1, 'search by error code and failed step finds the rolled-back run');
    if (others.succeeded) expect(await page.locator(`tr[data-run="${others.succeeded}"]`).count() === 0, 'and not the succeeded one');
    await page.goto(`${base}/?q=${others.rolledBack.slice(-8)}`);
    expect(await page.locator('tbody tr').count() === 1, 'search by short id finds exactly that run');
  }

  // 2. A run in each state, at both widths.
  if (others.waiting) {
    await openRun(others.waiting);
    expect((await page.locator('#run-state').innerText()).trim() === 'waiting', 'the waiting run is waiting');
    expect((await page.locator('#pending').innerText()).includes('b2'), 'its pending-step card names the waiting step');
    await checkTimeline('waiting run');
    await shotBoth('run-waiting');
  }
  if (others.paused) {
    // Issue 23: paused past a pivot. Red like every run that waits for an operator, never
    // the amber of a rolled-back run; the pivot is marked; why offers retry and cancel.
    await openRun(others.paused);
    expect((await page.locator('#run-state').innerText()).trim() === 'needs-operator', 'the paused run needs an operator');
    expect(await colourOf('#run-state') === RED, 'a paused run is red, not amber');
    expect(await page.locator('#run-paused').count() === 1, 'the header says it is paused');
    expect((await page.locator('#paused').innerText()).includes('past the pivot p'), 'and why: past the pivot');
    const pivotRow = await page.locator('tr[data-step="p"]').innerText();
    expect(pivotRow.includes('⚑ pivot'), `the pivot step is marked (${pivotRow})`);
    const fcard = await page.locator('#failure').innerText();
    expect(fcard.includes('Paused') && fcard.includes('retry') && fcard.includes('cancel'), `the failure card says paused and names retry and cancel (${fcard})`);
    expect(!fcard.includes('rolled back'), 'a paused run never says rolled back');
    const undo = await page.locator('#undo-stack').innerText();
    expect(undo.includes('only what came after the pivot p'), `the undo stack stops at the pivot (${undo})`);
    const actions = await page.locator('#why .actions a').allInnerTexts();
    expect(actions.some((a) => a.startsWith('retry')) && actions.some((a) => a.startsWith('cancel')), `why offers retry and cancel (${actions})`);
    await shotBoth('run-paused-past-pivot');
  }
  if (others.succeeded) {
    await openRun(others.succeeded);
    expect(await colourOf('#run-state') === GREEN, 'succeeded is green');
    await checkTimeline('succeeded run');
    await shotBoth('run-succeeded');
  }
  if (others.rolledBack) {
    await openRun(others.rolledBack);
    expect(await colourOf('#run-state') === AMBER, 'rolled-back is amber');
    const f = await page.locator('#failure').innerText();
    expect(f.includes('InvalidParameter') && !f.includes('retry'), 'the rolled-back run shows the error that caused it, with no retry hint');
    await checkTimeline('rolled-back run');
    // Zoom to the forward steps, then to the unwind, then drag a range.
    await page.locator('#zoom-forward').click();
    await page.waitForURL('**zoom=forward**');
    expect(await page.locator('#timeline-window').count() === 1, 'zoomed to the forward steps, the header says which window');
    await checkTimeline('forward zoom');
    await save('timeline-forward-zoom-1400', { fullPage: false });
    await page.locator('#zoom-unwind').click();
    await page.waitForURL('**zoom=unwind**');
    await checkTimeline('unwind zoom');
    await page.locator('#zoom-all').click();
    await page.waitForURL((u) => !u.search.includes('zoom'));
    await page.locator('svg.gantt').scrollIntoViewIfNeeded();
    const box = await page.locator('svg.gantt').boundingBox();
    const y = box.y + 30;
    await page.mouse.move(box.x + box.width * 0.35, y);
    await page.mouse.down();
    await page.mouse.move(box.x + box.width * 0.5, y, { steps: 4 });
    await page.mouse.move(box.x + box.width * 0.65, y, { steps: 4 });
    await page.mouse.up();
    await page.waitForURL('**from=**');
    expect(/[?&]from=\d+&to=\d+/.test(page.url()), `dragging across the timeline zooms to that range (${page.url()})`);
    expect((await page.locator('#timeline-window').innerText()).startsWith('showing'), 'and says which window it shows');
    await page.goto(`${base}/runs/${others.rolledBack}`);
    await shotBoth('run-rolled-back');
  }

  // 3. The stuck run: the pending-step card shows the stuck undo, and why says what to do.
  await page.goto(`${base}/`);
  await page.locator(`tr[data-run="${runId}"] td.runid a`).click();
  await page.waitForURL(`**/runs/${runId}`);
  const pending = await page.locator('#pending').innerText();
  expect(pending.includes('b1') && pending.includes('undo-failed'), 'the pending-step card shows the stuck undo of b1');
  expect(pending.includes('AnotherOperationInProgress'), 'with its error code');
  const failure = page.locator('#failure');
  const ftext = await failure.innerText();
  expect(ftext.includes('Why it unwound') && ftext.includes('c failed (handled'), `one failure card names the forward failure, as handled context (${ftext})`);
  // Issue 21 §5: the stuck undo is the primary red card: its resource with a copy button,
  // its own actions in its header, the error code once, and no "1/20" after a give-up.
  expect((await page.locator('#pending').getAttribute('class')).includes('stuck'), 'the stuck undo is the primary card');
  const pendingBorder = await page.locator('#pending').evaluate((el) => getComputedStyle(el).borderLeftColor);
  expect(pendingBorder === RED, `the stuck undo's card is red (${pendingBorder})`);
  const failureBorder = await failure.evaluate((el) => getComputedStyle(el).borderLeftColor);
  expect(failureBorder !== RED, `the handled forward failure is not the red card (${failureBorder})`);
  const acts = await page.locator('#stuck-actions a').allInnerTexts();
  expect(acts.includes('retry') && acts.includes('resolve'), `retry and resolve sit in the stuck undo's header (${acts})`);
  expect(await page.locator('#stuck-resource button.copy').count() === 1, 'the stuck resource has a copy button');
  expect(pending.split('AnotherOperationInProgress').length - 1 === 1, `the error code is shown once in the card (${pending})`);
  const attempt = await page.locator('#pending-attempt').innerText();
  expect(attempt.startsWith('gave up after'), `the attempt line says it gave up (${attempt})`);
  expect(ftext.includes('retry') && ftext.includes('--step b1'), 'its hint fits needs-operator: retry or resolve the stuck undo');
  const fbox = await failure.boundingBox();
  expect(fbox && fbox.y < 1000, 'the failure card is above the fold');
  const pbox = await page.locator('#pending').boundingBox();
  expect(pbox && Math.abs(pbox.y - fbox.y) < 2 && pbox.x < fbox.x, 'the stuck undo and the failure that started the unwind sit side by side');
  expect((await page.locator('#pending h2').innerText()).startsWith('Stuck undo'), 'the stuck undo is named as such');
  expect(await colourOf('#run-state') === RED, 'needs-operator is red');
  const why = await page.locator('#why').innerText();
  expect(why.includes('stuck while unwinding') && why.includes(`resolve ${runId} --step b1`), 'why explains and names the command');
  expect((await page.locator('#undo-stack').innerText()).includes('stuck'), 'the undo stack marks b1 as stuck');
  await checkTimeline('stuck run');
  // Resources: the id alone is copied; an Azure id links to the portal.
  const res = page.locator('#ledger tbody tr');
  expect(await res.count() > 0, 'the resources table lists what the run created');
  const firstId = (await res.first().locator('code.id').innerText()).trim();
  await res.first().locator('button.copy').click();
  // The clipboard write resolves later: wait for the button to say it copied.
  await res.first().locator('button.copy[data-copied]').waitFor({ timeout: 5000 }).catch(() => {});
  expect((await res.first().locator('button.copy').getAttribute('data-copied')) === firstId, 'a resource copy button copies the bare id');
  for (const r of await page.locator('#ledger tbody tr[data-kind="azure"]').all()) {
    const id = (await r.locator('code.id').innerText()).trim();
    if (!id.startsWith('/subscriptions/')) continue;
    const href = await r.locator('a.portal').getAttribute('href');
    expect(href && /^https:\/\/portal\.azure\.(com|us|cn)\/#(@[^/]+)?\/resource\/subscriptions\//.test(href) && href.endsWith(id), `the ARM id ${id} links to the portal (${href})`);
  }
  const ledgerFits = await page.locator('#ledger').evaluate((c) => c.scrollWidth <= c.clientWidth + 1);
  expect(ledgerFits, 'the resources table fits its card');
  await shotBoth('run-needs-operator');
  // Above the fold (for the README): state, stuck undo beside the failure, why, timeline.
  await page.evaluate(() => window.scrollTo(0, 0));
  await save('run-needs-operator-1400-fold', { fullPage: false });

  // 4. Resolve: the confirmation page explains, asks for a note, and submits.
  await page.locator('a.button[data-action="resolve"]').first().click();
  await page.waitForURL('**/confirm?**');
  expect((await page.locator('main').innerText()).includes('Mark the undo of b1 as done by hand'), 'the confirmation page explains the resolve');
  await page.fill('textarea[name="note"]', 'deleted b1 by hand in the browser test');
  await shotBoth('confirm');
  await page.locator('#confirm').click();
  await page.locator('#outcome').waitFor();
  const outcome = await page.locator('#outcome').innerText();
  expect(outcome.startsWith('Queued'), `the command was queued (${outcome})`);
  await save('queued-1400');

  // 5. Follow the run: the page refreshes itself until the run is rolled back.
  await page.locator('#back').click();
  await page.waitForURL(`**/runs/${runId}`);
  await page.waitForSelector('#run-body[data-state="rolled-back"]', { timeout: 60000 });
  expect((await page.locator('#run-state').innerText()).trim() === 'rolled-back', 'the run reached rolled-back');
  const colour = await colourOf('#run-state');
  expect(colour === AMBER, `rolled-back is amber, not succeeded's green (${colour})`);
  const fcard = await page.locator('#failure').innerText();
  expect(fcard.includes('start a new run') && !fcard.includes('retry'), 'a rolled-back run keeps its failure card, with no retry hint');
  expect((await page.locator('#commands').innerText()).includes('deleted b1 by hand'), 'the resolution and its note are on the page');
  expect((await page.locator('#undo-stack').innerText()).includes('resolved by'), 'the undo stack shows who resolved b1');
  const resolved = page.locator('#ledger tr.ledger-resolved');
  expect(await resolved.count() > 0, 'the resource whose undo was resolved by hand stays in the table');
  const rtext = await resolved.first().innerText();
  expect(rtext.includes('resolved by browser-test'), `marked "resolved by <who>: <note>" (${rtext})`);
  expect(await resolved.first().isVisible(), 'and visible');
  await shotBoth('resolved-rolled-back');

  expect(problems.length === 0, `no page errors (${problems.join('; ')})`);
} catch (e) {
  await save('failure').catch(() => {});
  console.error(e.message);
  console.error(problems.join('\n'));
  await browser.close();
  process.exit(1);
}
await browser.close();
console.log(`screenshots (${saved.length}):\n${saved.join('\n')}`);
