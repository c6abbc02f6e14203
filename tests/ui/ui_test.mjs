// Browser tests of the web UI (run by run_ui_tests.sh, which starts the server): playwright-core
// driving Debian's Chromium headless; kubectl checks what the UI changed. Every page is saved as
// a screenshot under $QM_SHOTS. Waits poll with generous deadlines (a loaded 2-core machine).
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';

const env = process.env;
const require = createRequire(path.join(env.QM_WEB_SRC, 'package.json'));
const { chromium } = require('playwright-core');

const URL = env.QM_URL;
const SHOTS = env.QM_SHOTS;
const TIMEOUT = 30_000;
let failures = 0;
let checks = 0;

function kubectl(...args) {
  return execFileSync('kubectl', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
}

// Polls `fn` until it returns a truthy value or the deadline passes; returns the last value.
async function eventually(fn, ms = TIMEOUT) {
  const deadline = Date.now() + ms;
  let last;
  for (;;) {
    try {
      last = await fn();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) return last;
    await new Promise((r) => setTimeout(r, 250));
  }
}

// The 2 s bounds of the issue ("shows up within 2 s without a reload"), each measured from the
// moment the kubectl command that made the change returned; printed at the end.
const bounds = [];

// Polls `fn` every 50 ms until it returns true within `ms` of `since` (a Date.now() taken when
// the change was made); returns the milliseconds from `since` to the check that saw it. Throws
// with `what` and the last value seen when `ms` pass first (a true seen later fails too).
async function within(ms, since, what, fn) {
  let last;
  for (;;) {
    try {
      last = await fn();
    } catch (e) {
      last = e;
    }
    const elapsed = Date.now() - since;
    if (last === true && elapsed <= ms) {
      bounds.push(`${what}: ${elapsed} ms`);
      return elapsed;
    }
    if (elapsed > ms) {
      const seen = last instanceof Error ? last.message : typeof last === 'string' ? last : JSON.stringify(last);
      throw new Error(`${what}: not within ${ms} ms (${last === true ? `seen after ${elapsed} ms` : `last seen: ${seen}`})`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

let page;

async function step(name, fn) {
  checks++;
  currentStep = name;
  const started = Date.now();
  try {
    await fn();
    console.log(`ok:   ${name} (${Date.now() - started} ms)`);
  } catch (e) {
    failures++;
    console.log(`FAIL: ${name}\n    ${String(e && e.stack ? e.stack : e).split('\n').slice(0, 6).join('\n    ')}`);
    const file = `failure-${checks}.png`;
    await page?.screenshot({ path: path.join(SHOTS, file), fullPage: true }).catch(() => {});
    console.log(`    screenshot: ${path.join(SHOTS, file)}`);
  }
}

function expect(cond, message) {
  if (!cond) throw new Error(message);
}

async function shot(name) {
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
}

// The viewport only (a full-page shot makes the window as tall as the page, and a virtualized
// table then draws every row).
async function shotView(name) {
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`) });
}

async function signIn(token) {
  await page.goto(URL + '/');
  await page.getByLabel('Token').fill(token);
  await page.getByRole('button', { name: 'Sign in' }).click();
}

async function nav(name) {
  await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name, exact: true }).click();
  await page.getByRole('heading', { level: 1, name }).waitFor({ timeout: TIMEOUT });
}

const browser = await chromium.launch({
  executablePath: env.QM_CHROMIUM,
  args: [
    '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync',
  ],
  // launch() gives Chromium a fresh, empty profile directory of its own each run.
});
const context = await browser.newContext({ ignoreHTTPSErrors: true, viewport: { width: 1400, height: 900 } });
context.setDefaultTimeout(TIMEOUT);
page = await context.newPage();
const consoleErrors = [];
page.on('console', (m) => {
  if (m.type() === 'error') consoleErrors.push(m.text());
});
// Chromium's console names the status of a failed response, not the request: these name both.
const errorResponses = [];
let currentStep = '';
page.on('response', (r) => {
  if (r.status() >= 400 && ![401, 403, 422].includes(r.status())) {
    errorResponses.push(`${r.status()} ${r.request().method()} ${r.url()} (step: ${currentStep})`);
  }
});
page.on('requestfailed', (r) => {
  // Watches are cancelled on purpose when a page is left or the user signs out.
  if (!/watch=1/.test(r.url())) consoleErrors.push(`request failed: ${r.url()} ${r.failure()?.errorText}`);
});

// The watches the page holds open now (each holds one of the six HTTP/1.1 connections a browser
// opens to a server: at most four may, so that ordinary requests never wait behind them).
const watchesOpen = new Set();
page.on('request', (r) => {
  if (/[?&]watch=1/.test(r.url())) watchesOpen.add(r);
});
page.on('requestfinished', (r) => watchesOpen.delete(r));
page.on('requestfailed', (r) => watchesOpen.delete(r));
function openWatches() {
  return [...watchesOpen].map((r) => {
    const u = new globalThis.URL(r.url());
    return decodeURIComponent(u.pathname + u.search).replace(/&resourceVersion=\d*|&allowWatchBookmarks=true/g, '');
  });
}

await step('a bad token is refused with a message on the form', async () => {
  await signIn('not-a-real-token');
  const alert = page.getByRole('alert');
  await alert.filter({ hasText: '401' }).waitFor();
  expect(await page.getByLabel('Token').isVisible(), 'the form is still shown');
  expect((await page.evaluate(() => sessionStorage.length)) === 0, 'a refused token is not kept');
  await shot('sign-in-error');
});

await step('code that cannot be loaded is named in an alert with a reload, not a blank page', async () => {
  // A tab of its own (its own session storage and module cache), whose CEL editor chunk fails.
  const tab = await context.newPage();
  await tab.route(/\/assets\/CelEditor-[^/]*\.js$/, (r) => r.abort());
  await tab.goto(URL + '/');
  await tab.getByLabel('Token').fill(env.QM_ADMIN_TOKEN);
  await tab.getByRole('button', { name: 'Sign in' }).click();
  await tab.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Inventory', exact: true }).click();
  await tab.getByRole('button', { name: 'Filter by CEL' }).click();
  const alert = tab.getByRole('alert').filter({ hasText: 'Could not load the editor' });
  await alert.waitFor();
  expect(await alert.getByRole('button', { name: 'Reload the page' }).isVisible(), 'it offers a reload');
  expect(await tab.getByRole('heading', { level: 1, name: 'Inventory' }).isVisible(), 'the page stays');
  await tab.screenshot({ path: path.join(SHOTS, 'lazy-load-failed.png'), fullPage: true });
  await tab.close();
});

let firstRenderMs = 0;
await step('sign in as admin: the overview counts the sample inventory', async () => {
  await signIn(env.QM_ADMIN_TOKEN);
  const t0 = Date.now();
  await page.getByRole('heading', { name: 'Overview' }).waitFor();
  await page.getByTestId('count-devices').filter({ hasText: /^18$/ }).waitFor();
  firstRenderMs = Date.now() - t0;
  // The node card counts the node list as it arrives (the device counts do not wait for it).
  await page.getByTestId('count-nodes').filter({ hasText: /^3$/ }).waitFor();
  expect((await page.evaluate(() => Object.keys(sessionStorage))).includes('quartermaster.token'),
    'the token is kept in sessionStorage');
  expect((await page.evaluate(() => localStorage.length)) === 0, 'nothing in localStorage');
  await page.getByRole('rowheader', { name: 'NVIDIA H100 80GB HBM3' }).waitFor();
  await shot('overview');
});

// The utilization chart reads the allocation history; nothing is allocated yet.
const chart = () => page.getByTestId('utilization-chart');
async function chartShows(range, allocated, peak) {
  await page.getByRole('group', { name: 'Time range' }).getByRole('button', { name: range }).click();
  const label = range.toLowerCase();
  await page.getByTestId('utilization-summary')
    .filter({ hasText: `Now ${allocated} allocated` })
    .filter({ hasText: `at most ${peak} allocated in the ${label}` })
    .waitFor();
  expect((await chart().getAttribute('data-last-allocated')) === String(allocated),
    `the chart's last point is ${allocated}`);
  expect((await chart().getAttribute('data-buckets')) === '60', 'sixty buckets');
  expect((await chart().locator('canvas').count()) === 1, 'uPlot drew the chart');
  expect((await chart().getByText('Allocated', { exact: true }).count()) === 1, 'legend names the line');
}

await step('the utilization chart starts with nothing allocated', async () => {
  await chartShows('Last hour', 0, 0);
});

// The reload of a deep link goes through the server's index.html fallback and the stored token.
await step('a reload of a page keeps the session (sessionStorage) and the route', async () => {
  await page.goto(URL + '/inventory');
  await page.getByRole('heading', { level: 1, name: 'Inventory' }).waitFor();
});

await step('device classes list with match and in-use counts', async () => {
  await nav('Device classes');
  await page.locator('[data-class="a100-80g"] [data-testid=matches]').filter({ hasText: '4 devices on 1 node' }).waitFor();
  await page.locator('[data-class="gpu.nvidia.com"] [data-testid=matches]').filter({ hasText: '18 devices on 3 nodes' }).waitFor();
  await shot('device-classes');
});

const typo = "device.driver == 'gpu.nvidia.com' &&\n  device.atributes['gpu.nvidia.com'].productName.contains('H100')";
const fixed = "device.driver == 'gpu.nvidia.com' &&\n  device.attributes['gpu.nvidia.com'].productName.contains('H100')";
await step('create a class: a CEL typo is shown at its position', async () => {
  await page.getByRole('button', { name: 'Create device class' }).click();
  await page.getByRole('heading', { name: 'New device class' }).waitFor();
  await page.getByLabel('Name', { exact: true }).fill('ui-h100');
  const editor = page.getByRole('textbox', { name: 'Selector 1' });
  await editor.click();
  await editor.fill(typo);
  const error = page.getByTestId('selector-error');
  await error.filter({ hasText: "Line 2, column 9: undefined field 'atributes'" }).waitFor();
  // The editor marks the position itself: the character at line 2, column 9 is the '.'.
  const marked = page.locator('.cm-lintRange-error');
  await marked.first().waitFor();
  expect((await marked.first().textContent()) === '.', `marked text: ${await marked.first().textContent()}`);
  const describedBy = await editor.getAttribute('aria-describedby');
  expect(describedBy && (await page.locator(`#${describedBy}`).textContent()).includes('atributes'),
    'the error list describes the editor');
  await shot('device-class-error');
});

await step('fix it: the preview shows the matching devices', async () => {
  const editor = page.getByRole('textbox', { name: 'Selector 1' });
  await editor.fill(fixed);
  await page.getByTestId('preview-summary').filter({ hasText: 'Matches 8 devices on 1 node' }).waitFor();
  const rows = page.getByTestId('preview-devices').locator('tbody tr');
  expect((await rows.count()) === 8, `preview rows: ${await rows.count()}`);
  const nodes = new Set(await rows.locator('td:first-child').allTextContents());
  expect(nodes.size === 1 && nodes.has('gpu-node-c'), `preview nodes: ${[...nodes]}`);
  expect((await page.getByTestId('selector-error').count()) === 0, 'the error is gone');
  await shot('device-class-preview');
});

await step('save: kubectl get deviceclass shows it', async () => {
  await page.getByRole('button', { name: 'Create', exact: true }).click();
  await page.getByRole('heading', { level: 1, name: 'Device classes' }).waitFor();
  await page.locator('[data-class="ui-h100"] [data-testid=matches]').filter({ hasText: '8 devices on 1 node' }).waitFor();
  const expression = kubectl('get', 'deviceclass', 'ui-h100', '-o', 'jsonpath={.spec.selectors[0].cel.expression}');
  expect(expression === fixed, `stored expression: ${expression}`);
});

await step('class configuration: opaque parameters edited as JSON reach kubectl', async () => {
  await page.locator('[data-class="ui-h100"]').getByRole('link', { name: 'ui-h100', exact: true }).click();
  await page.getByRole('heading', { name: 'Device class ui-h100' }).waitFor();
  await page.getByRole('button', { name: 'Add configuration' }).click();
  await page.getByLabel('Configuration 1 driver').fill('gpu.nvidia.com');
  const parameters = page.getByLabel('Configuration 1 parameters (JSON)');
  await parameters.fill('{"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",');
  await page.getByTestId('config-error').filter({ hasText: 'Parameters: not valid JSON' }).waitFor();
  const save = page.getByRole('button', { name: 'Save', exact: true });
  expect(await save.isDisabled(), 'Save waits for the JSON to be fixed');
  await parameters.fill(JSON.stringify({
    apiVersion: 'resource.nvidia.com/v1beta1', kind: 'GpuConfig',
    sharing: { strategy: 'TimeSlicing', timeSlicingConfig: { interval: 'Long' } },
  }, null, 2));
  await page.getByTestId('config-error').waitFor({ state: 'detached' });
  await page.locator('details', { hasText: 'YAML' }).locator('summary').click();
  await page.locator('pre.yaml').filter({ hasText: 'TimeSlicing' }).waitFor();
  await shot('device-class-config');
  await save.click();
  await page.getByRole('heading', { level: 1, name: 'Device classes' }).waitFor();
  const stored = kubectl('get', 'deviceclass', 'ui-h100', '-o',
    'jsonpath={.spec.config[0].opaque.driver} {.spec.config[0].opaque.parameters.sharing.timeSlicingConfig.interval}');
  expect(stored === 'gpu.nvidia.com Long', `stored config: ${stored}`);
  const expression = kubectl('get', 'deviceclass', 'ui-h100', '-o', 'jsonpath={.spec.selectors[0].cel.expression}');
  expect(expression === fixed, `the selector is kept: ${expression}`);
});

await step('server-side validation errors appear next to the field', async () => {
  await page.getByRole('button', { name: 'Create device class' }).click();
  await page.getByLabel('Name', { exact: true }).fill('Not_A_Valid_Name');
  await page.getByRole('textbox', { name: 'Selector 1' }).fill('true');
  await page.locator('#class-name-error').filter({ hasText: /lowercase|RFC 1123|DNS/i }).waitFor();
  expect((await page.getByLabel('Name', { exact: true }).getAttribute('aria-invalid')) === 'true', 'name marked invalid');
  await shot('device-class-invalid-name');
});

await step('cordon a node from Inventory: kubectl shows it unschedulable', async () => {
  await nav('Inventory');
  await page.getByRole('button', { name: 'Cordon gpu-node-b' }).click();
  await page.locator('tr[data-node="gpu-node-b"]').getByText('SchedulingDisabled').waitFor();
  const unschedulable = await eventually(() => kubectl('get', 'node', 'gpu-node-b', '-o', 'jsonpath={.spec.unschedulable}') === 'true');
  expect(unschedulable === true, 'kubectl shows spec.unschedulable=true');
  const status = kubectl('get', 'node', 'gpu-node-b');
  expect(/SchedulingDisabled/.test(status), `kubectl get node: ${status}`);
  await page.getByRole('button', { name: 'gpu-node-b', exact: true }).click();
  await page.getByRole('cell', { name: 'gpu-5' }).first().waitFor();
  await shot('inventory');
  await page.getByRole('button', { name: 'Uncordon gpu-node-b' }).click();
  const back = await eventually(() => kubectl('get', 'node', 'gpu-node-b', '-o', 'jsonpath={.spec.unschedulable}') === '');
  expect(back === true, 'uncordoned');
});

// The bodies of the DeviceHolderReviews the page posts from now on, until stop() is called.
function recordHolderReviews() {
  const reviews = [];
  const onReview = (r) => {
    if (r.method() === 'POST' && r.url().includes('/apis/admin.quartermaster.io/v1alpha1/deviceholderreviews')) {
      reviews.push(r.postDataJSON());
    }
  };
  page.on('request', onReview);
  return { reviews, stop: () => page.off('request', onReview) };
}

// API requests the page made (path and query), to check what it lists.
function recordRequests() {
  const urls = [];
  const onRequest = (r) => {
    const u = new globalThis.URL(r.url());
    if (/^\/apis?\//.test(u.pathname)) urls.push(decodeURIComponent(u.pathname + u.search));
  };
  page.on('request', onRequest);
  return { urls, stop: () => page.off('request', onRequest) };
}

await step('Overview counts nodes live without listing nodes or pods: a cordon and a NotReady node show up', async () => {
  const requests = recordRequests();
  await nav('Overview');
  const states = page.getByTestId('count-node-states');
  await states.filter({ hasText: /^\d+ ready, \d+ not ready, \d+ unknown, 0 cordoned$/ }).waitFor();
  const before = (await states.textContent()).trim();
  const [, ready, notReady, unknown] = /^(\d+) ready, (\d+) not ready, (\d+) unknown/.exec(before).map(Number);
  expect(ready + notReady + unknown === 3, `three nodes: ${before}`);
  kubectl('cordon', 'gpu-node-c');
  await states.filter({ hasText: new RegExp(`, ${notReady} not ready, .*, 1 cordoned$`) }).waitFor();
  // NotReady, as a kubelet would report it (the server's node monitor leaves a foreign reason).
  const conditions = JSON.parse(kubectl('get', 'node', 'gpu-node-c', '-o', 'jsonpath={.status.conditions}') || '[]');
  const notReadyNow = [
    ...conditions.filter((c) => c.type !== 'Ready'),
    { type: 'Ready', status: 'False', reason: 'UiTest', message: 'set by the browser test',
      lastTransitionTime: new Date().toISOString().replace(/\.\d+Z$/, 'Z') },
  ];
  kubectl('patch', 'node', 'gpu-node-c', '--subresource=status', '--type=merge', '-p',
    JSON.stringify({ status: { conditions: notReadyNow } }));
  await states.filter({ hasText: new RegExp(`, ${notReady + 1} not ready, .*, 1 cordoned$`) }).waitFor();
  expect((await page.getByTestId('count-nodes').textContent()) === '3', 'still three nodes');
  await shot('overview-node-not-ready');
  kubectl('patch', 'node', 'gpu-node-c', '--subresource=status', '--type=merge', '-p',
    JSON.stringify({ status: { conditions } }));
  kubectl('uncordon', 'gpu-node-c');
  await states.filter({ hasText: new RegExp(`^${before}$`) }).waitFor();
  requests.stop();
  const podLists = requests.urls.filter((u) => u.startsWith('/api/v1/pods?') && !/watch=1/.test(u));
  expect(podLists.some((u) => u.includes('fieldSelector=spec.nodeName=&')) &&
    podLists.every((u) => u.includes('fieldSelector=spec.nodeName=&')),
    `only unbound pods are listed: ${podLists.join(' ')}`);
  // ... and watched: the server's selector watch says when a pod stops matching.
  const podWatches = requests.urls.filter((u) => u.startsWith('/api/v1/pods?') && /watch=1/.test(u));
  expect(podWatches.every((u) => u.includes('fieldSelector=spec.nodeName=&')),
    `only unbound pods are watched: ${podWatches.join(' ')}`);
  // The node counts are the server's (the ClusterSummary, watched): no Node is listed or watched,
  // and slices and claims are not watched either (the summary says when they change).
  const nodeRequests = requests.urls.filter((u) => /^\/api\/v1\/nodes\b/.test(u));
  expect(nodeRequests.length === 0, `no node is read: ${nodeRequests.join(' ')}`);
  const open = openWatches();
  expect(open.some((u) => u.startsWith('/apis/admin.quartermaster.io/v1alpha1/clustersummaries?watch=1')),
    `the ClusterSummary is watched: ${open.join(' ')}`);
  const kindWatches = requests.urls.filter((u) =>
    /^\/apis\/resource\.k8s\.io\/v1\/(resourceslices|resourceclaims)\?/.test(u) && /watch=1/.test(u));
  expect(kindWatches.length === 0, `slices and claims are not watched: ${kindWatches.join(' ')}`);
});

const inventoryCount = () => page.getByTestId('inventory-count');

await step('Inventory: a CEL filter shows the devices it matches, a typo at its position', async () => {
  await nav('Inventory');
  await inventoryCount().filter({ hasText: /^3 of 3 nodes, 18 devices$/ }).waitFor();
  await page.getByRole('button', { name: 'Filter by CEL' }).click();
  const editor = page.getByRole('textbox', { name: 'CEL filter' });
  await editor.click();
  await editor.fill("device.atributes['gpu.nvidia.com'].productName.contains('H100')");
  await page.getByTestId('cel-filter-error')
    .filter({ hasText: "Line 1, column 7: undefined field 'atributes'" }).waitFor();
  const marked = page.locator('.cm-lintRange-error');
  await marked.first().waitFor();
  expect((await marked.first().textContent()) === '.', `marked text: ${await marked.first().textContent()}`);
  expect((await page.getByTestId('cel-filter-summary').count()) === 0, 'no summary while the expression is wrong');
  expect((await inventoryCount().textContent()) === '3 of 3 nodes, 18 devices', 'an invalid filter hides nothing');
  await shot('inventory-cel-error');
  await editor.fill("device.attributes['gpu.nvidia.com'].productName.contains('H100')");
  await page.getByTestId('cel-filter-summary').filter({ hasText: /^Matches 8 devices on 1 node$/ }).waitFor();
  await inventoryCount().filter({ hasText: /^1 of 3 nodes, 18 devices$/ }).waitFor();
  expect((await page.getByTestId('cel-filter-error').count()) === 0, 'the error is gone');
  const nodeRows = page.locator('table.nodes > tbody > tr[data-node]');
  const names = await nodeRows.evaluateAll((rows) => rows.map((r) => r.getAttribute('data-node')));
  expect(names.join(',') === 'gpu-node-c', `nodes shown: ${names}`);
  const cell = page.locator('tr[data-node="gpu-node-c"] [data-testid=node-devices]');
  expect((await cell.textContent()) === '8 (0 in use), 8 match', `devices cell: ${await cell.textContent()}`);
  // A filter that matches part of a node: only those devices are listed inside it.
  await editor.fill("device.attributes['gpu.nvidia.com'].productName.contains('H100') &&\n  device.attributes['resource.kubernetes.io'].pcieRoot == 'pci0000:40'");
  await page.getByTestId('cel-filter-summary').filter({ hasText: /^Matches 4 devices on 1 node$/ }).waitFor();
  await page.getByRole('button', { name: 'gpu-node-c', exact: true }).click();
  const listed = await eventually(async () => {
    const ids = await page.locator('#node-gpu-node-c tr[data-device]').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-device')));
    return ids.join(',') === ['gpu-4', 'gpu-5', 'gpu-6', 'gpu-7'].map((d) => `gpu.nvidia.com/gpu-node-c/${d}`).join(',') || ids;
  });
  expect(listed === true, `devices listed in gpu-node-c: ${listed}`);
  await page.getByText('4 of 8 devices match the CEL filter.', { exact: true }).waitFor();
  await shot('inventory-cel-filter');
  await page.getByRole('button', { name: 'Remove the CEL filter' }).click();
  await inventoryCount().filter({ hasText: /^3 of 3 nodes, 18 devices$/ }).waitFor();
  await page.getByRole('button', { name: 'gpu-node-c', exact: true }).click();
});

const taintRules = () => kubectl('get', 'devicetaintrules', '-o',
  'jsonpath={range .items[*]}{.spec.deviceSelector.driver}/{.spec.deviceSelector.pool}/{.spec.deviceSelector.device} {.spec.taint.key}={.spec.taint.value}:{.spec.taint.effect}{"\\n"}{end}');

await step('Inventory: add a device taint (kubectl shows the DeviceTaintRule), then remove it', async () => {
  expect(taintRules() === '', `no rule at first: ${taintRules()}`);
  await page.getByRole('button', { name: 'gpu-node-a', exact: true }).click();
  const row = page.locator('tr[data-device="gpu.nvidia.com/gpu-node-a/gpu-1"]');
  await row.getByRole('button', { name: 'Add taint to gpu-node-a/gpu-1' }).click();
  const form = page.getByRole('form', { name: 'Add a taint to gpu-node-a/gpu-1' });
  // The server's 422 is shown next to the field it names.
  await form.getByLabel('Key').fill('not a key');
  await form.getByRole('button', { name: 'Add taint' }).click();
  await page.locator('#taint-key-error').filter({ hasText: /name part|alphanumeric|qualified/i }).waitFor();
  expect((await form.getByLabel('Key').getAttribute('aria-invalid')) === 'true', 'key marked invalid');
  await form.getByLabel('Key').fill('example.com/maintenance');
  await form.getByLabel('Value').fill('planned');
  await form.getByLabel('Effect').selectOption('NoSchedule');
  await form.getByRole('button', { name: 'Add taint' }).click();
  await row.getByText('example.com/maintenance=planned:NoSchedule', { exact: true }).waitFor();
  const focused = () => page.evaluate(() => document.activeElement?.getAttribute('aria-label'));
  expect((await focused()) === 'Add taint to gpu-node-a/gpu-1', `focus after adding: ${await focused()}`);
  // Escape closes the form, and the focus goes back to its button.
  await page.getByRole('button', { name: 'Add taint to gpu-node-a/gpu-0' }).click();
  await page.getByRole('form', { name: 'Add a taint to gpu-node-a/gpu-0' }).getByLabel('Key').waitFor();
  await page.keyboard.press('Escape');
  await page.getByRole('form', { name: 'Add a taint to gpu-node-a/gpu-0' }).waitFor({ state: 'detached' });
  expect((await focused()) === 'Add taint to gpu-node-a/gpu-0', `focus after Escape: ${await focused()}`);
  const rules = await eventually(() => taintRules() === 'gpu.nvidia.com/gpu-node-a/gpu-1 example.com/maintenance=planned:NoSchedule' || taintRules());
  expect(rules === true, `kubectl get devicetaintrules: ${rules}`);
  // The server applies it: the preview of the device lists the taint.
  const other = page.locator('tr[data-device="gpu.nvidia.com/gpu-node-a/gpu-0"] [data-testid=device-taints]');
  expect((await other.textContent()).startsWith('none'), `gpu-0 untouched: ${await other.textContent()}`);
  await shot('inventory-device-taint');
  await row.getByRole('button', { name: 'Remove taint example.com/maintenance from gpu-node-a/gpu-1' }).click();
  const gone = await eventually(() => taintRules() === '' || taintRules());
  expect(gone === true, `rules left: ${gone}`);
  await eventually(async () => (await row.getByText('example.com/maintenance=planned:NoSchedule').count()) === 0);
  expect((await row.getByText('example.com/maintenance=planned:NoSchedule').count()) === 0, 'the chip is gone');
  await page.getByRole('button', { name: 'gpu-node-a', exact: true }).click();
});

// A device going unhealthy, the two ways it happens: its driver publishes a quartermaster.io/unhealthy
// taint in its ResourceSlice (here gpu-node-c/gpu-7, patched with kubectl), or the node agent's
// health report makes the server write a DeviceTaintRule for it (here gpu-node-c/gpu-6, the rule
// applied with kubectl as the server names, labels and words it). Nothing is allocated yet.
const HEALTH_SLICE = 'gpu-node-c-gpu.nvidia.com';
const HEALTH_RULE = 'unhealthy.gpu.nvidia.com.gpu-node-c.gpu-6';
const sliceTaint = (taints) => {
  const devices = JSON.parse(kubectl('get', 'resourceslice', HEALTH_SLICE, '-o', 'json')).spec.devices;
  const i = devices.findIndex((d) => d.name === 'gpu-7');
  const op = taints ? { op: 'add', path: `/spec/devices/${i}/taints`, value: taints } : { op: 'remove', path: `/spec/devices/${i}/taints` };
  kubectl('patch', 'resourceslice', HEALTH_SLICE, '--type=json', '-p', JSON.stringify([op]));
  return Date.now();
};
const UNHEALTHY_GPU_7 = [{ key: 'quartermaster.io/unhealthy', value: 'XidError', effect: 'NoSchedule' }];
const healthRule = (present) => {
  if (!present) {
    kubectl('delete', 'devicetaintrule', HEALTH_RULE);
    return Date.now();
  }
  kubectlApply(`apiVersion: resource.k8s.io/v1
kind: DeviceTaintRule
metadata:
  name: ${HEALTH_RULE}
  labels: {quartermaster.io/unhealthy-node: gpu-node-c}
spec:
  deviceSelector: {driver: gpu.nvidia.com, pool: gpu-node-c, device: gpu-6}
  taint: {key: quartermaster.io/unhealthy, value: EccErrors, effect: NoSchedule}
`);
  return Date.now();
};

await step('a device going unhealthy shows up within 2 s without a reload (Overview counts, Inventory state), and healthy again', async () => {
  const held = kubectl('get', 'resourceclaims', '-A', '-o', 'jsonpath={.items[*].status.allocation.devices.results[*].device}');
  expect(held === '', `nothing is allocated: ${held}`);
  // The Overview: the unhealthy and free counts, and the H100 model's row (devices, allocated,
  // free, unhealthy, tainted), as the server's UtilizationHistoryReview splits them.
  await nav('Overview');
  const counts = async () => [
    await page.getByTestId('count-unhealthy').textContent(),
    await page.getByTestId('count-free').textContent(),
    (await page.getByRole('row', { name: /^NVIDIA H100 80GB HBM3/ }).locator('td').allTextContents()).join(' '),
  ].join(' | ');
  const countsAre = (want) => async () => (await counts()) === want || (await counts());
  await eventually(countsAre('0 | 18 | 8 0 8 0 0'));
  expect((await counts()) === '0 | 18 | 8 0 8 0 0', `counts at first: ${await counts()}`);
  await within(2000, sliceTaint(UNHEALTHY_GPU_7), 'Overview counted the slice-tainted device unhealthy',
    countsAre('1 | 17 | 8 0 7 1 1'));
  await within(2000, healthRule(true), 'Overview counted the rule-tainted device unhealthy',
    countsAre('2 | 16 | 8 0 6 2 2'));
  // The utilization chart asks again when slices or taint rules change, and its newest bucket
  // counts both devices unhealthy (the health history, migrations/0015).
  const chartSummary = async () => (await page.getByTestId('utilization-summary').textContent()).trim();
  const bothUnhealthy = 'Now 0 allocated, 16 free, 2 unhealthy of 18 devices;';
  await eventually(async () => (await chartSummary()).startsWith(bothUnhealthy));
  const summaryNow = await chartSummary();
  expect(summaryNow.startsWith(bothUnhealthy), `the chart counts both devices unhealthy: ${summaryNow}`);
  await shot('overview-unhealthy');
  await within(2000, sliceTaint(null), 'Overview counted the slice-tainted device healthy again',
    countsAre('1 | 17 | 8 0 7 1 1'));
  await within(2000, healthRule(false), 'Overview counted the rule-tainted device healthy again',
    countsAre('0 | 18 | 8 0 8 0 0'));

  // Inventory, gpu-node-c open: each device's state and taints.
  await nav('Inventory');
  await page.getByRole('button', { name: 'gpu-node-c', exact: true }).click();
  const device = (name) => page.locator(`#node-gpu-node-c tr[data-device="gpu.nvidia.com/gpu-node-c/${name}"]`);
  const state = async (name) => (await device(name).getByTestId('device-state').textContent()).trim();
  const statesAre = (want) => async () => {
    const got = `${await state('gpu-5')}, ${await state('gpu-6')}, ${await state('gpu-7')}`;
    return got === want || got;
  };
  await eventually(statesAre('free, free, free'));
  await within(2000, sliceTaint(UNHEALTHY_GPU_7), 'Inventory showed the slice-tainted device unhealthy',
    statesAre('free, free, unhealthy (XidError)'));
  expect((await device('gpu-7').getByTestId('device-taints').locator('li').allTextContents()).join() ===
    'quartermaster.io/unhealthy=XidError:NoSchedule (from the driver)', 'the driver\'s taint is listed');
  await within(2000, healthRule(true), 'Inventory showed the rule-tainted device unhealthy',
    statesAre('free, unhealthy (EccErrors), unhealthy (XidError)'));
  const chip = device('gpu-6').locator(`[data-rule="${HEALTH_RULE}"]`);
  expect((await chip.locator('code').textContent()) === 'quartermaster.io/unhealthy=EccErrors:NoSchedule', 'the rule\'s taint is listed');
  const remove = chip.getByRole('button', { name: 'Remove taint quartermaster.io/unhealthy from gpu-node-c/gpu-6' });
  expect(await remove.isDisabled(), 'a health report\'s rule cannot be removed from the UI');
  await shot('inventory-unhealthy');
  await within(2000, sliceTaint(null), 'Inventory showed the slice-tainted device healthy again',
    statesAre('free, unhealthy (EccErrors), free'));
  await within(2000, healthRule(false), 'Inventory showed the rule-tainted device healthy again',
    statesAre('free, free, free'));
  await page.getByRole('button', { name: 'gpu-node-c', exact: true }).click();
});

// The seed manifests whose pods the sample inventory (18 GPUs, gpu-node-c tainted) can place, with
// the claim and the template they use (tests/testdata/seeds/README.md): gpu-claim shared by pod1
// and pod1-rhel, a claim per pod from a template (trainer-0, trainer-1), and the device-plugin
// style requests of nvidia.com/gpu (example-vector-add on gpu-node-a, gpu-tolerating anywhere),
// five devices in all. 07 and 14 are claims no seed pod uses (they stay pending).
const SEED_FILES = ['04-resourceclaim-v1beta1.yaml', '05-pod-shared-claim.yaml', '06-pod-shared-claim-rhel.yaml',
  '12-claimtemplate-per-pod.yaml', '13-pods-from-template.yaml', '20-pod-device-plugin-style.yaml',
  '21-pod-gpu-toleration.yaml'];
const SEED_PODS = ['example-vector-add', 'gpu-tolerating', 'pod1', 'pod1-rhel', 'trainer-0', 'trainer-1'];
// The rows of Assignments By claim as drawn: claim, consumer pods, the "shared by" badge.
const claimRowsDrawn = () => page.locator('table[aria-label="Allocated claims"] tr[data-claim]').evaluateAll((rows) =>
  rows.map((r) => ({
    claim: r.dataset.claim,
    pods: Array.from(r.cells[3].querySelectorAll('li')).map((li) => li.textContent).sort(),
    badge: r.cells[3].querySelector('.badge')?.textContent || '',
  })).sort((a, b) => (a.claim < b.claim ? -1 : 1)));

await step('the seed pods applied with kubectl show up in Assignments within 2 s of kubectl apply returning', async () => {
  await nav('Assignments');
  await page.getByText('No claim is allocated.').waitFor();
  kubectl('apply', ...SEED_FILES.flatMap((f) => ['-f', path.join(env.QM_SEEDS, f)]));
  const applied = Date.now();
  let rows = [];
  const ms = await within(2000, applied, 'Assignments showed the six seed pods', async () => {
    rows = await claimRowsDrawn();
    const shown = rows.flatMap((r) => r.pods).sort();
    const shared = rows.find((r) => r.claim === 'dra-test/gpu-claim');
    return JSON.stringify(shown) === JSON.stringify(SEED_PODS.map((p) => `pod ${p}`)) &&
      shared?.badge === 'shared by 2' || rows;
  });
  console.log(`      Assignments showed the six seed pods ${ms} ms after kubectl apply returned`);
  // What kubectl says: each allocated claim of dra-test with the pods it is reserved for.
  const claims = JSON.parse(kubectl('get', 'resourceclaims', '-n', 'dra-test', '-o', 'json')).items
    .filter((c) => c.status?.allocation)
    .map((c) => ({
      claim: `dra-test/${c.metadata.name}`,
      pods: (c.status.reservedFor || []).map((r) => `pod ${r.name}`).sort(),
    }))
    .sort((a, b) => (a.claim < b.claim ? -1 : 1));
  expect(claims.length === 5, `kubectl shows five allocated claims: ${JSON.stringify(claims)}`);
  const want = claims.map((c) => ({ ...c, badge: c.pods.length > 1 ? `shared by ${c.pods.length}` : '' }));
  expect(JSON.stringify(rows) === JSON.stringify(want), `rows ${JSON.stringify(rows)}\nkubectl ${JSON.stringify(want)}`);
  expect(want.find((c) => c.claim === 'dra-test/gpu-claim')?.pods.join() === 'pod pod1,pod pod1-rhel',
    'gpu-claim is reserved for pod1 and pod1-rhel');
  await shot('assignments');
  // The seed claim stays for the rest of the test; the other pods go (their generated claims with
  // them), and their rows leave live.
  for (const pod of ['example-vector-add', 'gpu-tolerating', 'trainer-0', 'trainer-1']) {
    kubectl('delete', 'pod', '-n', 'dra-test', pod, '--grace-period=0', '--force', '--wait=false');
  }
  const released = await eventually(() => JSON.stringify(JSON.parse(kubectl('get', 'resourceclaims', '-n', 'dra-test', '-o', 'json'))
    .items.filter((c) => c.status?.allocation).map((c) => c.metadata.name)) === '["gpu-claim"]');
  expect(released === true, 'kubectl shows only gpu-claim allocated');
  const left = await eventually(async () => {
    rows = await claimRowsDrawn();
    return JSON.stringify(rows.map((r) => r.claim)) === '["dra-test/gpu-claim"]';
  });
  expect(left === true, `rows after the deletes: ${JSON.stringify(rows)}`);
});

function kubectlApply(manifest) {
  return execFileSync('kubectl', ['apply', '-f', '-'], { input: manifest, encoding: 'utf8' }).trim();
}

await step('Pending shows an unschedulable pod with the scheduler explanation', async () => {
  kubectlApply(`apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: too-many, namespace: dra-test}
spec:
  devices:
    requests:
    - name: gpus
      exactly: {deviceClassName: a100-80g, allocationMode: ExactCount, count: 9}
---
apiVersion: v1
kind: Pod
metadata: {name: waits-for-gpus, namespace: dra-test}
spec:
  resourceClaims: [{name: gpus, resourceClaimName: too-many}]
  containers:
  - name: c
    image: busybox
    resources: {claims: [{name: gpus}]}
`);
  await nav('Pending');
  const row = page.locator('tr', { hasText: 'waits-for-gpus' });
  await row.getByText('Unschedulable', { exact: true }).waitFor();
  const text = await row.locator('td').last().textContent();
  const reason = kubectl('get', 'pod', '-n', 'dra-test', 'waits-for-gpus', '-o',
    'jsonpath={.status.conditions[?(@.type=="PodScheduled")].message}');
  expect(text === reason, `UI: ${text}\nkubectl: ${reason}`);
  // The class the message names is looked up by name and linked (no list of every class or node).
  expect(/\ba100-80g\b/.test(reason), `the message names the class: ${reason}`);
  await row.getByRole('link', { name: 'a100-80g' }).waitFor();
  await shot('pending');
});

await step('Pending links the class, the node and the quota that block a pod', async () => {
  kubectlApply(`apiVersion: v1
kind: Namespace
metadata: {name: ui-pending}
---
apiVersion: v1
kind: ResourceQuota
metadata: {name: gpu-limit, namespace: ui-pending}
spec:
  hard: {gpu.nvidia.com.deviceclass.resource.k8s.io/devices: "0"}
---
apiVersion: v1
kind: ResourceQuota
metadata: {name: pod-limit, namespace: ui-pending}
spec:
  hard: {pods: "10"}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu, namespace: ui-pending}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.nvidia.com}
---
apiVersion: v1
kind: Pod
metadata: {name: over-quota, namespace: ui-pending}
spec:
  resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}]
  containers:
  - name: c
    image: busybox
    resources: {claims: [{name: gpu}]}
---
apiVersion: v1
kind: Pod
metadata: {name: pinned-to-c, namespace: ui-pending}
spec:
  nodeSelector: {kubernetes.io/hostname: gpu-node-c}
  containers: [{name: c, image: busybox}]
`);
  const message = (pod) => kubectl('get', 'pod', '-n', 'ui-pending', pod, '-o',
    'jsonpath={.status.conditions[?(@.type=="PodScheduled")].message}');
  try {
    await nav('Pending');
    // The class: the scheduler's count names it ("insufficient devices of class a100-80g").
    const gpus = page.locator('tr[data-pod="dra-test/waits-for-gpus"]');
    const classLink = gpus.getByRole('link', { name: 'a100-80g', exact: true });
    await classLink.waitFor();
    expect((await classLink.getAttribute('href')) === '/device-classes/a100-80g', `class link: ${await classLink.getAttribute('href')}`);
    // The quota: the claim the template would generate is refused by quota gpu-limit.
    const quotaRow = page.locator('tr[data-pod="ui-pending/over-quota"]');
    const quotaLink = quotaRow.getByRole('link', { name: 'quota ui-pending/gpu-limit', exact: true });
    await quotaLink.waitFor();
    const quotaMessage = message('over-quota');
    expect(quotaMessage.startsWith('resourceclaims.resource.k8s.io "over-quota-gpu-" is forbidden: exceeded quota: gpu-limit, requested: '),
      `kubectl: ${quotaMessage}`);
    expect((await quotaRow.getByTestId('pending-message').textContent()) === quotaMessage,
      `UI: ${await quotaRow.getByTestId('pending-message').textContent()}\nkubectl: ${quotaMessage}`);
    expect((await quotaLink.textContent()) === 'gpu-limit', `the link reads ${await quotaLink.textContent()}`);
    expect((await quotaLink.getAttribute('href')) === '/quotas/ui-pending/gpu-limit', `quota link: ${await quotaLink.getAttribute('href')}`);
    expect((await quotaRow.getByRole('link').count()) === 1, 'only the quota is linked in its message');
    // The node: a pod pinned to gpu-node-c, whose taint it does not tolerate (the scheduler's
    // counts name no node; the pod's node selector does).
    const pinnedRow = page.locator('tr[data-pod="ui-pending/pinned-to-c"]');
    const nodeLink = pinnedRow.getByRole('link', { name: 'gpu-node-c', exact: true });
    await nodeLink.waitFor();
    const pinnedMessage = message('pinned-to-c');
    expect(pinnedMessage === '0/3 nodes are available: 2 node(s) didn\'t match Pod\'s node affinity/selector, 1 node(s) had untolerated taint {nvidia.com/gpu: present}.',
      `kubectl: ${pinnedMessage}`);
    expect((await pinnedRow.getByTestId('pending-message').textContent()) === pinnedMessage,
      `UI: ${await pinnedRow.getByTestId('pending-message').textContent()}`);
    expect((await pinnedRow.getByTestId('pinned-nodes').textContent()).trim() === '(asks for node gpu-node-c)',
      `pinned: ${await pinnedRow.getByTestId('pinned-nodes').textContent()}`);
    expect((await nodeLink.getAttribute('href')) === '/inventory/gpu-node-c', `node link: ${await nodeLink.getAttribute('href')}`);
    expect((await page.locator('tr[data-pod="dra-test/waits-for-gpus"] [data-testid=pinned-nodes]').count()) === 0,
      'a pod pinned to no node names none');
    await shot('pending-links');

    // Each link leads to what it names: the quota marked among the others on Quotas ...
    await quotaLink.click();
    await page.getByRole('heading', { level: 1, name: 'Quotas' }).waitFor();
    expect(new globalThis.URL(page.url()).pathname === '/quotas/ui-pending/gpu-limit', `at ${page.url()}`);
    await page.getByTestId('quota-target').filter({ hasText: /^Showing ResourceQuota ui-pending\/gpu-limit \(marked\)\. All quotas$/ }).waitFor();
    const marked = await page.locator('tr[data-quota]').evaluateAll((rows) =>
      rows.map((r) => `${r.dataset.quota}${r.getAttribute('aria-current') === 'true' ? ' (current)' : ''}`));
    expect(JSON.stringify(marked) === JSON.stringify(['ui-pending/gpu-limit (current)', 'ui-pending/pod-limit']),
      `quota rows: ${JSON.stringify(marked)}`);
    await shot('quotas-linked');
    // ... the node opened in Inventory ...
    await nav('Pending');
    await page.locator('tr[data-pod="ui-pending/pinned-to-c"]').getByRole('link', { name: 'gpu-node-c', exact: true }).click();
    await page.getByRole('heading', { level: 1, name: 'Inventory' }).waitFor();
    await page.locator('#node-gpu-node-c tr[data-device="gpu.nvidia.com/gpu-node-c/gpu-0"]').waitFor();
    expect((await page.getByRole('button', { name: 'gpu-node-c', exact: true }).getAttribute('aria-expanded')) === 'true',
      'gpu-node-c is open');
    // ... and the class in its editor.
    await nav('Pending');
    await page.locator('tr[data-pod="dra-test/waits-for-gpus"]').getByRole('link', { name: 'a100-80g', exact: true }).click();
    await page.getByRole('heading', { level: 1, name: 'Device class a100-80g' }).waitFor();
  } finally {
    kubectl('delete', 'pod', '-n', 'ui-pending', '--all', '--grace-period=0', '--force', '--wait=false');
    kubectl('delete', 'resourcequota', '-n', 'ui-pending', '--all');
    kubectl('delete', 'resourceclaimtemplate', '-n', 'ui-pending', '--all');
  }
});

await step('Pending: a pod leaves the page when the scheduler binds it', async () => {
  // Away long enough for the pods' watch to stop (1.5 s), so Pending opens its own.
  await nav('Quotas');
  await page.waitForTimeout(2_000);
  const requests = recordRequests();
  kubectlApply(`apiVersion: v1
kind: Pod
metadata: {name: waits-for-label, namespace: dra-test}
spec:
  nodeSelector: {ui-test/placement: later}
  containers: [{name: c, image: busybox}]
`);
  await nav('Pending');
  const row = page.locator('tr', { hasText: 'waits-for-label' });
  await row.getByText('Unschedulable', { exact: true }).waitFor();
  await page.locator('tr', { hasText: 'waits-for-gpus' }).waitFor();
  kubectl('label', 'node', 'gpu-node-a', 'ui-test/placement=later');
  const bound = await eventually(() => kubectl('get', 'pod', '-n', 'dra-test', 'waits-for-label', '-o',
    'jsonpath={.spec.nodeName}') === 'gpu-node-a');
  expect(bound === true, 'kubectl shows the pod bound to gpu-node-a');
  await row.waitFor({ state: 'detached' });
  expect(await page.locator('tr', { hasText: 'waits-for-gpus' }).isVisible(), 'the other pod still waits');
  requests.stop();
  const lists = requests.urls.filter((u) => /^\/api\/v1\/(pods|nodes)\?/.test(u) && !/watch=1/.test(u));
  expect(lists.every((u) => /fieldSelector=(spec\.nodeName=$|spec\.nodeName=&|metadata\.name=)/.test(u)),
    `Pending lists only unbound pods and looks nodes up by name: ${lists.join(' ')}`);
  // The bound pod left through the filtered watch's DELETED: no watch of every pod is open.
  const podWatches = requests.urls.filter((u) => u.startsWith('/api/v1/pods?') && /watch=1/.test(u));
  expect(podWatches.length > 0 && podWatches.every((u) => u.includes('fieldSelector=spec.nodeName=&')),
    `Pending watches only unbound pods: ${podWatches.join(' ')}`);
  kubectl('delete', 'pod', '-n', 'dra-test', 'waits-for-label', '--grace-period=0', '--force', '--wait=false');
  kubectl('label', 'node', 'gpu-node-a', 'ui-test/placement-');
});

await step('the Overview lists recent warning events live (the scheduler\'s FailedScheduling; one made with kubectl within 2 s)', async () => {
  const fromKubectl = await eventually(() => kubectl('get', 'events', '-n', 'dra-test', '--field-selector',
    'type=Warning,involvedObject.name=waits-for-gpus', '-o', 'jsonpath={.items[*].reason}').includes('FailedScheduling'));
  expect(fromKubectl === true, 'kubectl shows the FailedScheduling event');
  await nav('Overview');
  const table = page.getByTestId('warning-events');
  await table.locator('tr[data-event-reason="FailedScheduling"]', { hasText: 'Pod dra-test/waits-for-gpus' }).first().waitFor();
  // A warning recorded later shows up without a reload, within 2 s.
  const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  kubectlApply(`apiVersion: v1
kind: Event
metadata: {name: ui-test-warning, namespace: dra-test}
involvedObject: {kind: Pod, namespace: dra-test, name: waits-for-gpus, apiVersion: v1}
reason: UiTestWarning
message: recorded by the browser test
type: Warning
count: 1
firstTimestamp: "${now}"
lastTimestamp: "${now}"
`);
  const created = Date.now();
  const row = table.locator('tr[data-event-reason="UiTestWarning"]');
  await row.waitFor({ timeout: 2000 });
  console.log(`      the new warning event was shown ${Date.now() - created} ms after kubectl created it`);
  expect((await row.getByRole('link', { name: 'Pod dra-test/waits-for-gpus' }).count()) === 1, 'the pod is linked');
  // Three watches: the ClusterSummary, the unbound pods, the warning events.
  await new Promise((r) => setTimeout(r, 2000)); // the last page's watches stop after 1.5 s
  const open = openWatches();
  expect(open.length <= 4, `the Overview holds at most four watches: ${open.join(' ')}`);
  expect(open.some((u) => u.startsWith('/api/v1/events?fieldSelector=type=Warning&watch=1')),
    `warning events are watched: ${open.join(' ')}`);
  await shot('overview-warnings');
  kubectl('delete', 'event', '-n', 'dra-test', 'ui-test-warning');
});

await step('no page holds more than four watches (six HTTP/1.1 connections per server)', async () => {
  const held = [];
  for (const name of ['Overview', 'Device classes', 'Inventory', 'Assignments', 'Pending', 'Quotas', 'Audit']) {
    await nav(name);
    // The previous page's watches stop 1.5 s after it is left; this page's have started by then.
    await new Promise((r) => setTimeout(r, 2500));
    const open = openWatches();
    held.push(`${name}: ${open.length}`);
    expect(open.length <= 4, `${name} holds ${open.length} watches: ${open.join(' ')}`);
  }
  console.log(`      watches held: ${held.join(', ')}`);
});

await step('deleting a class names the claims that use it, from the server (no claim is read), live', async () => {
  await nav('Device classes');
  const requests = recordRequests();
  const { reviews, stop: stopReviews } = recordHolderReviews();
  try {
    await page.locator('[data-class="a100-80g"]').getByRole('link', { name: 'a100-80g', exact: true }).click();
    await page.getByRole('button', { name: 'Delete', exact: true }).waitFor();
    await page.waitForTimeout(500);
    const claimReads = () => requests.urls.filter((u) => /^\/apis\/resource\.k8s\.io\/v1\/(namespaces\/[^/]+\/)?resourceclaims/.test(u));
    expect(claimReads().every((u) => /^[^?]*\?limit=1$/.test(u)),
      `the editor lists no claim before Delete: ${claimReads().join(' ')}`);
    expect(reviews.length === 0, `no class review before Delete: ${JSON.stringify(reviews)}`);
    await page.getByRole('button', { name: 'Delete', exact: true }).click();
    const text = page.getByTestId('confirm-delete-text');
    await text.filter({ hasText: /^1 claim uses this class \(dra-test\/too-many\)\. Allocated claims keep their devices, but new claims for it will fail\. Delete device class a100-80g\?$/ }).waitFor();
    // A claim created while the confirmation is open is named too (the ClusterSummary says claims
    // changed; the review is asked again).
    // Five of them: six use the class, the first five are named (the review's spec.limit) and the
    // count is the server's (status.claimCount).
    kubectlApply([0, 1, 2, 3, 4].map((i) => `apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: delete-warning-${i}, namespace: dra-test}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: a100-80g}
`).join('---\n'));
    await text.filter({ hasText: /^6 claims use this class \(dra-test\/delete-warning-0, dra-test\/delete-warning-1, dra-test\/delete-warning-2, dra-test\/delete-warning-3, dra-test\/delete-warning-4, …\)\. / }).waitFor({ timeout: 5000 });
    await shot('device-class-delete');
    for (let i = 0; i < 5; i++) kubectl('delete', 'resourceclaim', '-n', 'dra-test', `delete-warning-${i}`, '--wait=false');
    await text.filter({ hasText: /^1 claim uses this class \(dra-test\/too-many\)\. / }).waitFor({ timeout: 5000 });
    expect(claimReads().every((u) => /^[^?]*\?limit=1$/.test(u)), `Delete read no claim: ${claimReads().join(' ')}`);
    expect(reviews.length >= 2 && reviews.every((r) => r.spec?.deviceClassName === 'a100-80g' && r.spec.limit === 5 && !r.spec.pools),
      `the claims come from DeviceHolderReviews for the class: ${JSON.stringify(reviews)}`);
    await page.getByRole('button', { name: 'Cancel' }).click();
  } finally {
    requests.stop();
    stopReviews();
  }
  expect((await kubectl('get', 'deviceclass', 'a100-80g', '-o', 'name')) === 'deviceclass.resource.k8s.io/a100-80g',
    'the class is still there');
});

await step('a list shown again after its watch stopped does not show the objects of the earlier watch', async () => {
  kubectlApply(`apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: stale-check}
spec:
  selectors:
  - cel: {expression: 'device.driver == "gpu.nvidia.com"'}
`);
  await nav('Device classes');
  const row = page.locator('[data-class="stale-check"]');
  await row.waitFor();
  await nav('Quotas'); // lists no class: the classes' watch stops 1.5 s after Device classes is left
  await page.waitForTimeout(2500);
  kubectl('delete', 'deviceclass', 'stale-check');
  // Every row drawn from now on is recorded (the first render comes before any response).
  await page.evaluate(() => {
    window.__staleRows = 0;
    window.__staleObserver = new MutationObserver(() => {
      if (document.querySelector('[data-class="stale-check"]')) window.__staleRows++;
    });
    window.__staleObserver.observe(document.body, { childList: true, subtree: true });
  });
  await nav('Device classes');
  await page.locator('[data-class="a100-80g"]').waitFor();
  await page.waitForTimeout(300);
  const stale = await page.evaluate(() => {
    window.__staleObserver.disconnect();
    return window.__staleRows;
  });
  expect(stale === 0, `the deleted class was drawn ${stale} times from the stopped watch's objects`);
  expect(!(await row.count()), 'the deleted class is not listed');
});

await step('Quotas shows used against hard', async () => {
  kubectlApply(`apiVersion: v1
kind: ResourceQuota
metadata: {name: gpus, namespace: dra-test}
spec:
  hard: {a100-80g.deviceclass.resource.k8s.io/devices: "4", count/resourceclaims.resource.k8s.io: "10"}
`);
  await nav('Quotas');
  await page.getByRole('row', { name: /gpus/ }).getByText('a100-80g.deviceclass.resource.k8s.io/devices').waitFor();
  await shot('quotas');
  // Edit a hard limit: the server's 422 appears next to its input, then a valid value reaches kubectl.
  await page.getByRole('button', { name: 'Edit quota dra-test/gpus' }).click();
  const input = page.getByLabel('Hard limit for a100-80g.deviceclass.resource.k8s.io/devices');
  await input.fill('lots');
  await page.getByRole('button', { name: 'Save', exact: true }).click();
  const fieldError = page.getByTestId('quota-field-error');
  await fieldError.waitFor();
  const describedBy = await input.getAttribute('aria-describedby');
  expect(describedBy && (await page.locator(`#${describedBy}`).textContent()).trim() === (await fieldError.textContent()).trim(),
    `the error describes the input: ${await fieldError.textContent()}`);
  await shot('quotas-error');
  await input.fill('6');
  await page.getByRole('button', { name: 'Save', exact: true }).click();
  const hard = await eventually(() =>
    kubectl('get', 'resourcequota', '-n', 'dra-test', 'gpus', '-o', "jsonpath={.spec.hard['a100-80g\\.deviceclass\\.resource\\.k8s\\.io/devices']}") === '6');
  expect(hard === true, 'kubectl shows the new hard limit');
  await page.getByRole('button', { name: 'Edit quota dra-test/gpus' }).waitFor();
});

await step('Audit: each filter keeps the records it names and leaves out the others', async () => {
  const viewer = 'system:serviceaccount:default:ui-viewer';
  // Two identities' records of one object: the view ServiceAccount's patch of namespace ui-audit
  // (denied, 403) and the admin's (kubectl label, 200).
  kubectlApply('apiVersion: v1\nkind: Namespace\nmetadata: {name: ui-audit}\n');
  const denied = await page.evaluate(async (token) => (await fetch('/api/v1/namespaces/ui-audit', {
    method: 'PATCH',
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/merge-patch+json' },
    body: JSON.stringify({ metadata: { labels: { audited: 'by-viewer' } } }),
  })).status, env.QM_VIEW_TOKEN);
  expect(denied === 403, `the viewer's patch: ${denied}`);
  kubectl('label', 'namespace', 'ui-audit', 'audited=by-admin');
  // The records the API holds for a query (kubectl get --raw), as the page's table shows them.
  const fromApi = (q) => JSON.parse(kubectl('get', '--raw', `/apis/audit.quartermaster.io/v1/events?${new URLSearchParams({ ...q, limit: '200' })}`))
    .items.map((r) => [r.user.username, r.verb, `${r.resource}${r.subresource ? `/${r.subresource}` : ''}${r.apiGroup ? `.${r.apiGroup}` : ''}`,
      r.namespace, r.name, String(r.code)].join(' | '));
  const both = await eventually(() => {
    const users = fromApi({ name: 'ui-audit' }).map((r) => r.split(' | ')[0]);
    return users.includes(viewer) && users.includes('admin');
  });
  expect(both === true, `the API holds both records: ${fromApi({ name: 'ui-audit' }).join('; ')}`);

  await nav('Audit');
  const table = page.locator('section[aria-labelledby="audit-title"] table');
  const shown = () => table.locator('tbody tr').evaluateAll((rows) =>
    rows.map((r) => Array.from(r.cells).slice(1, 7).map((c) => c.textContent).join(' | ')));
  const search = async (q) => {
    for (const [label, key] of [['User', 'user'], ['Resource', 'resource'], ['Namespace', 'namespace'], ['Name', 'name']]) {
      await page.getByLabel(label, { exact: true }).fill(q[key] || '');
    }
    const want = fromApi(q);
    await page.getByRole('button', { name: 'Search' }).click();
    let rows = [];
    const same = await eventually(async () => {
      rows = want.length ? await shown() : (await page.getByText('No audit record matches.').count()) ? [] : ['(rows)'];
      return JSON.stringify(rows) === JSON.stringify(want);
    }, 10_000);
    expect(same === true, `filter ${JSON.stringify(q)}: rows\n      ${rows.join('\n      ')}\n    API\n      ${want.join('\n      ')}`);
    return rows;
  };
  const byUser = (rows, user) => rows.filter((r) => r.startsWith(`${user} | `));
  // A name alone: both identities' records.
  let rows = await search({ name: 'ui-audit' });
  expect(byUser(rows, viewer).join() === `${viewer} | patch | namespaces | ui-audit | ui-audit | 403`, `the viewer's record: ${rows}`);
  expect(byUser(rows, 'admin').some((r) => r === 'admin | patch | namespaces | ui-audit | ui-audit | 200'), `the admin's patch: ${rows}`);
  // A user: the other identity's record is left out.
  rows = await search({ name: 'ui-audit', user: viewer });
  expect(rows.join() === `${viewer} | patch | namespaces | ui-audit | ui-audit | 403`, `only the viewer's: ${rows}`);
  rows = await search({ name: 'ui-audit', user: 'admin' });
  expect(rows.length > 0 && byUser(rows, 'admin').length === rows.length, `only the admin's: ${rows}`);
  // A resource: another resource's records are left out, and its own kept.
  rows = await search({ name: 'ui-audit', resource: 'nodes' });
  expect(rows.length === 0, `no node is named ui-audit: ${rows}`);
  rows = await search({ name: 'gpu-node-b', resource: 'nodes', user: 'admin' });
  expect(rows.filter((r) => r === 'admin | patch | nodes |  | gpu-node-b | 200').length === 2,
    `the cordon and the uncordon from Inventory: ${rows}`);
  // The admin's changes to device classes made through the UI.
  rows = await search({ user: 'admin', resource: 'deviceclasses' });
  expect(rows.includes('admin | create | deviceclasses.resource.k8s.io |  | ui-h100 | 201') &&
    rows.includes('admin | update | deviceclasses.resource.k8s.io |  | ui-h100 | 200'), `the class created and its configuration saved: ${rows}`);
  expect(rows.every((r) => r.startsWith('admin | ') && r.includes(' | deviceclasses.resource.k8s.io | ')), `only the admin's classes: ${rows}`);
  await shot('audit');
  kubectl('delete', 'namespace', 'ui-audit', '--wait=false');
  await nav('Overview');
  await page.getByTestId('count-allocated').filter({ hasText: /^1$/ }).waitFor();
  await shot('overview-after');
});

await step('the utilization chart shows the allocations made by the seed pods (hour, day, week)', async () => {
  // The seed claim holds one device now; the unschedulable claim holds none. The five seed claims
  // held five devices at once before four of their pods were deleted.
  await nav('Overview');
  const held = kubectl('get', 'resourceclaims', '-A', '-o',
    'jsonpath={range .items[*]}{.status.allocation.devices.results[*].device}{" "}{end}').trim().split(/\s+/).filter(Boolean);
  expect(held.length === 1, `kubectl shows one allocated device, got ${held}`);
  for (const range of ['Last hour', 'Last day', 'Last week']) await chartShows(range, 1, 5);
  await page.getByLabel('Show', { exact: true }).selectOption('namespace');
  await chart().getByText('dra-test', { exact: true }).waitFor();
  await page.getByLabel('Show', { exact: true }).selectOption('');
  await chartShows('Last hour', 1, 5);
  await shot('overview-utilization');
});

const MIG_INVENTORY = `apiVersion: v1
kind: Node
metadata:
  name: mig-node
  labels: {kubernetes.io/hostname: mig-node}
spec: {}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: mig-node-gpu.nvidia.com-counters}
spec:
  driver: gpu.nvidia.com
  nodeName: mig-node
  pool: {name: mig-node, generation: 1, resourceSliceCount: 2}
  sharedCounters:
  - name: gpu-0-counter-set
    counters:
      memory: {value: 80Gi}
      compute-slices: {value: "7"}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: mig-node-gpu.nvidia.com}
spec:
  driver: gpu.nvidia.com
  nodeName: mig-node
  pool: {name: mig-node, generation: 1, resourceSliceCount: 2}
  devices:
${[['3g.40gb', 0, 40, 3], ['2g.20gb', 0, 20, 2], ['1g.10gb', 0, 10, 1], ['1g.10gb', 1, 10, 1]].map(([p, n, gb, slices]) => `  - name: gpu-0-mig-${p.replace('.', '-')}-${n}
    attributes:
      type: {string: mig}
      profile: {string: ${p}}
      productName: {string: NVIDIA A100-SXM4-80GB MIG ${p}}
      parentUUID: {string: GPU-6f1b0c3e-0000-4000-8000-000000000000}
    capacity: {memory: {value: ${gb}Gi}}
    consumesCounters:
    - counterSet: gpu-0-counter-set
      counters: {memory: {value: ${gb}Gi}, compute-slices: {value: "${slices}"}}
`).join('')}`;

const MIG_CLAIM = `apiVersion: v1
kind: Namespace
metadata: {name: mig-test}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: mig.nvidia.com}
spec:
  selectors:
  - cel: {expression: "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: mig-claim, namespace: mig-test}
spec:
  devices:
    requests:
    - name: big
      exactly:
        deviceClassName: mig.nvidia.com
        selectors:
        - cel: {expression: "device.attributes['gpu.nvidia.com'].profile == '3g.40gb'"}
    - name: small
      exactly:
        deviceClassName: mig.nvidia.com
        selectors:
        - cel: {expression: "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"}
---
apiVersion: v1
kind: Pod
metadata: {name: mig-pod, namespace: mig-test}
spec:
  resourceClaims: [{name: mig, resourceClaimName: mig-claim}]
  containers:
  - name: c
    image: busybox
    resources: {claims: [{name: mig}]}
`;

const heldDevices = (ns, claim) => kubectl('get', 'resourceclaim', '-n', ns, claim, '-o',
  'jsonpath={range .status.allocation.devices.results[*]}{.driver}/{.pool}/{.device}{" "}{end}').trim().split(/\s+/).filter(Boolean);

const MIG_CLAIM_2 = `apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: mig-claim-2, namespace: mig-test}
spec:
  devices:
    requests:
    - name: medium
      exactly:
        deviceClassName: mig.nvidia.com
        selectors:
        - cel: {expression: "device.attributes['gpu.nvidia.com'].profile == '2g.20gb'"}
---
apiVersion: v1
kind: Pod
metadata: {name: mig-pod-2, namespace: mig-test}
spec:
  resourceClaims: [{name: mig, resourceClaimName: mig-claim-2}]
  containers:
  - name: c
    image: busybox
    resources: {claims: [{name: mig}]}
`;

await step('Inventory: MIG partitions drawn inside their GPU with the counters consumed', async () => {
  kubectlApply(MIG_INVENTORY);
  kubectlApply(MIG_CLAIM);
  const held = await eventually(() => heldDevices('mig-test', 'mig-claim').length === 2);
  expect(held === true, 'kubectl shows the MIG claim allocated');
  const requests = recordRequests();
  await nav('Inventory');
  await page.getByRole('button', { name: 'mig-node', exact: true }).click();
  const gpu = page.getByRole('region', { name: 'GPU gpu-0' });
  await gpu.getByText('4 partitions, 2 in use', { exact: false }).waitFor();
  // Retried until the counters read so (a mismatch is kept for the message, not returned).
  let uses = '';
  const counted = await eventually(async () => {
    uses = (await gpu.getByTestId('counter-use').allTextContents()).sort().join(' | ');
    return uses === 'compute-slices 4/7 | memory 50Gi/80Gi';
  });
  expect(counted === true, `counters: ${uses}`);
  expect((await gpu.locator('tr[data-device]').count()) === 4, 'four partitions inside the GPU');
  expect((await page.locator('#node-mig-node tr[data-device]').count()) === 4, 'no partition outside it');
  const meter = gpu.locator('[data-counter="compute-slices"] meter');
  expect((await meter.getAttribute('value')) === '4' && (await meter.getAttribute('max')) === '7', 'the meter shows 4 of 7');
  await shot('inventory-mig');
  // Live, without a claim read: a third partition allocated and released while the page is open.
  const inUse = (n) => gpu.getByText(`4 partitions, ${n} in use`, { exact: false });
  kubectlApply(MIG_CLAIM_2.replaceAll('mig-claim-2', 'mig-live').replaceAll('mig-pod-2', 'mig-live-pod'));
  const t0 = Date.now();
  await inUse(3).waitFor();
  console.log(`      Inventory showed the third partition in use ${Date.now() - t0} ms after kubectl applied its claim and pod`);
  kubectl('delete', 'pod', '-n', 'mig-test', 'mig-live-pod', '--grace-period=0', '--force', '--wait=false');
  kubectl('delete', 'resourceclaim', '-n', 'mig-test', 'mig-live', '--wait=false');
  await inUse(2).waitFor();
  requests.stop();
  const claimReads = requests.urls.filter((u) => u.startsWith('/apis/resource.k8s.io/v1/resourceclaims'));
  expect(claimReads.length === 0, `Inventory reads no ResourceClaim: ${claimReads.join(' ')}`);
  expect(requests.urls.some((u) => u.startsWith('/apis/admin.quartermaster.io/v1alpha1/deviceholderreviews')),
    'the holders come from DeviceHolderReviews');
  const gone = await eventually(() => !kubectl('get', 'resourceclaims', '-n', 'mig-test', '-o', 'name').includes('/mig-live'));
  expect(gone === true, 'kubectl shows mig-live deleted');
});

await step('Assignments by device: who holds each device now, and the changes seen live', async () => {
  const seedDevice = heldDevices('dra-test', 'gpu-claim');
  expect(seedDevice.length === 1, `the seed claim holds ${seedDevice}`);
  const migDevices = heldDevices('mig-test', 'mig-claim');
  expect(migDevices.length === 2, `the MIG claim holds ${migDevices}`);
  await nav('Assignments');
  await page.getByRole('group', { name: 'View' }).getByRole('button', { name: 'By device' }).click();
  await page.waitForTimeout(1600); // By claim's claims stop being watched 1.5 s after it is left
  const requests = recordRequests();
  await page.getByTestId('device-count').filter({ hasText: /^3 of 22 devices held; 3 shown$/ }).waitFor();
  const row = page.locator(`tr[data-device="${seedDevice[0]}"]`);
  const holder = row.locator('[data-holder="dra-test/gpu-claim"]');
  await holder.waitFor();
  const text = await holder.textContent();
  expect(/claim dra-test\/gpu-claim \(request gpu\)/.test(text), `holder: ${text}`);
  expect(/pods (pod1, pod1-rhel|pod1-rhel, pod1);/.test(text), `pods: ${text}`);
  for (const id of migDevices) {
    const h = await page.locator(`tr[data-device="${id}"] [data-holder="mig-test/mig-claim"]`).textContent();
    expect(/^allocatedclaim mig-test\/mig-claim \(request (big|small)\)pods mig-pod;/.test(h), `${id}: ${h}`);
  }
  expect((await page.getByTestId('history').count()) === 0, 'nothing changed yet');
  // The recorded history (DeviceAllocationHistoryReview) of the seed GPU has its allocation.
  await row.getByRole('button', { name: `History of ${seedDevice[0]}` }).click();
  await row.getByTestId('recorded-history').locator('li[data-event="Allocated"]')
    .filter({ hasText: /allocated to claim dra-test\/gpu-claim$/ }).first().waitFor();
  // A second claim for a partition, applied while the page is open, shows up with its change.
  kubectlApply(MIG_CLAIM_2);
  const held = await eventually(() => heldDevices('mig-test', 'mig-claim-2').length === 1);
  expect(held === true, 'kubectl shows the second MIG claim allocated');
  const [second] = heldDevices('mig-test', 'mig-claim-2');
  expect(second === 'gpu.nvidia.com/mig-node/gpu-0-mig-2g-20gb-0', `second claim holds ${second}`);
  await page.getByTestId('device-count').filter({ hasText: /^4 of 22 devices held; 4 shown$/ }).waitFor();
  const r = page.locator(`tr[data-device="${second}"]`);
  await r.getByTestId('history').filter({ hasText: /^\d\d:\d\d:\d\d allocated to mig-test\/mig-claim-2$/ }).waitFor();
  expect((await r.locator('[data-holder="mig-test/mig-claim-2"]').textContent()).includes('pods mig-pod-2'), 'held by mig-pod-2');
  expect((await page.getByTestId('history').count()) === 1, 'the other devices did not change');
  requests.stop();
  const claimReads = requests.urls.filter((u) => u.startsWith('/apis/resource.k8s.io/v1/resourceclaims'));
  expect(claimReads.length === 0, `By device reads no ResourceClaim: ${claimReads.join(' ')}`);
  expect(!openWatches().some((u) => u.startsWith('/apis/resource.k8s.io/v1/resourceclaims')),
    `no claim watch is open: ${openWatches().join(' ')}`);
  await shot('assignments-by-device');
  // The GPU's counters follow (Inventory, live).
  await nav('Inventory');
  await page.getByRole('button', { name: 'mig-node', exact: true }).click();
  const gpu = page.getByRole('region', { name: 'GPU gpu-0' });
  // Retried until the counters read so (a mismatch is kept for the message, not returned).
  let uses = '';
  const counted = await eventually(async () => {
    uses = (await gpu.getByTestId('counter-use').allTextContents()).sort().join(' | ');
    return uses === 'compute-slices 6/7 | memory 70Gi/80Gi';
  });
  expect(counted === true, `counters: ${uses}`);
  // A device's row in Inventory links to its assignments.
  await page.getByRole('link', { name: `Assignments of ${second}` }).click();
  await page.getByRole('heading', { level: 1, name: 'Assignments' }).waitFor();
  await page.getByTestId('device-count').filter({ hasText: /^4 of 22 devices held; 1 shown$/ }).waitFor();
  expect((await page.getByLabel('Filter').inputValue()) === second, 'filtered by the device');
  await page.locator(`tr[data-device="${second}"] [data-holder="mig-test/mig-claim-2"]`).waitFor();
  // Every device (the one view that lists every ResourceSlice): the free ones with their models.
  await page.getByLabel('Filter').fill('');
  await page.getByLabel('Only devices held now or changed').uncheck();
  await page.getByTestId('device-count').filter({ hasText: /^4 of 22 devices held; 22 shown$/ }).waitFor();
  await page.locator('tr[data-device="gpu.nvidia.com/gpu-node-a/gpu-1"] th').filter({ hasText: /NVIDIA A100/ }).waitFor();
  await page.getByLabel('Only devices held now or changed').check();
  await page.getByTestId('device-count').filter({ hasText: /^4 of 22 devices held; 4 shown$/ }).waitFor();
});

// A claim for one GPU and a pod that uses it (pinned to `node` when given), in ui-filter.
const filterClaim = (name, node) => `apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: ${name}, namespace: ui-filter}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.nvidia.com}
---
apiVersion: v1
kind: Pod
metadata: {name: ${name}-pod, namespace: ui-filter}
spec:
${node ? `  nodeSelector: {kubernetes.io/hostname: ${node}}\n` : ''}  resourceClaims: [{name: gpu, resourceClaimName: ${name}}]
  containers:
  - name: c
    image: busybox
    resources: {claims: [{name: gpu}]}
`;

await step('Assignments by claim, filtered: a node, a namespace or a device lists no claim cluster-wide; free text pages; rows right and live', async () => {
  const kjson = (...args) => JSON.parse(kubectl(...args, '-o', 'json'));
  const keyOf = (c) => `${c.metadata.namespace}/${c.metadata.name}`;
  const idsOf = (c) => (c.status.allocation.devices?.results || []).map((r) => `${r.driver}/${r.pool}/${r.device}`);
  const allocated = () => kjson('get', 'resourceclaims', '-A').items.filter((c) => c.status?.allocation);
  // What kubectl says each filter form should show.
  const onNode = (node) => {
    const ids = new Set(kjson('get', 'resourceslices', '--field-selector', `spec.nodeName=${node}`).items
      .flatMap((sl) => (sl.spec.devices || []).map((d) => `${sl.spec.driver}/${sl.spec.pool.name}/${d.name}`)));
    return allocated().filter((c) => idsOf(c).some((id) => ids.has(id))).map(keyOf).sort();
  };
  const inNamespace = (ns) => allocated().filter((c) => c.metadata.namespace === ns).map(keyOf).sort();
  const shown = async () => (await page.locator('table[aria-label="Allocated claims"] tr[data-claim]')
    .evaluateAll((rows) => rows.map((r) => r.dataset.claim))).sort();
  const rowsAre = async (want, ms = TIMEOUT) => {
    let rows = [];
    const got = await eventually(async () => {
      rows = await shown();
      return JSON.stringify(rows) === JSON.stringify(want);
    }, ms);
    if (got !== true) await shot('assignments-filter-failure'); // before the cleanup below
    expect(got === true, `rows ${JSON.stringify(rows)}, want ${JSON.stringify(want)} (filter ${await page.getByLabel('Filter').inputValue()}: ${await count.textContent()})`);
  };
  const count = page.getByTestId('assignment-count');
  const clusterWide = (urls) => urls.filter((u) => u.startsWith('/apis/resource.k8s.io/v1/resourceclaims'));
  const [seedDevice] = heldDevices('dra-test', 'gpu-claim');
  const seedNode = kjson('get', 'resourceslices').items
    .find((sl) => `${sl.spec.driver}/${sl.spec.pool.name}` === seedDevice.split('/').slice(0, 2).join('/')).spec.nodeName;
  kubectlApply('apiVersion: v1\nkind: Namespace\nmetadata: {name: ui-filter}\n');

  const requests = recordRequests();
  const { reviews, stop: stopReviews } = recordHolderReviews();
  try {
    // A node (Inventory's "Assignments on" link, ?node=): the claims holding its devices.
    await nav('Inventory');
    await page.getByRole('button', { name: seedNode, exact: true }).click();
    await page.getByRole('link', { name: `Assignments on ${seedNode}`, exact: true }).click();
    await page.getByRole('heading', { level: 1, name: 'Assignments' }).waitFor();
    expect((await page.getByLabel('Filter').inputValue()) === seedNode, 'filtered by the node');
    await count.filter({ hasText: `holding devices of node ${seedNode}` }).waitFor();
    let want = onNode(seedNode);
    expect(want.includes('dra-test/gpu-claim'), `kubectl: ${want}`);
    await rowsAre(want);
    // Live: a claim allocated on that node while the page is open.
    kubectlApply(filterClaim('filter-live', seedNode));
    const held = await eventually(() => heldDevices('ui-filter', 'filter-live').length === 1);
    expect(held === true, 'kubectl shows filter-live allocated');
    const t0 = Date.now();
    want = onNode(seedNode);
    expect(want.includes('ui-filter/filter-live'), `kubectl: ${want}`);
    await rowsAre(want);
    console.log(`      the node's filter showed the new claim ${Date.now() - t0} ms after kubectl did`);
    await page.locator('tr[data-claim="ui-filter/filter-live"]').getByText('pod filter-live-pod', { exact: true }).waitFor();
    await shot('assignments-filter-node');

    // A namespace (a bare word naming one): its claims only, live.
    await page.getByLabel('Filter').fill('ui-filter');
    await count.filter({ hasText: /in namespace ui-filter$/ }).waitFor();
    await rowsAre(['ui-filter/filter-live']);
    kubectlApply(filterClaim('filter-live-2'));
    const held2 = await eventually(() => heldDevices('ui-filter', 'filter-live-2').length === 1);
    expect(held2 === true, 'kubectl shows filter-live-2 allocated');
    await rowsAre(inNamespace('ui-filter'), 5000);
    expect(inNamespace('ui-filter').length === 2, `kubectl: ${inNamespace('ui-filter')}`);
    // "namespace/text": the namespace's claims whose name contains the text.
    await page.getByLabel('Filter').fill('ui-filter/-2');
    await rowsAre(['ui-filter/filter-live-2']);
    await shot('assignments-filter-namespace');

    // A device (driver/pool/device): the claims holding it.
    await page.getByLabel('Filter').fill(seedDevice);
    await count.filter({ hasText: `holding ${seedDevice}` }).waitFor();
    await rowsAre(allocated().filter((c) => idsOf(c).includes(seedDevice)).map(keyOf).sort());

    // Back to the node: a claim released and deleted leaves, live.
    await page.getByLabel('Filter').fill(seedNode);
    await rowsAre(onNode(seedNode));
    kubectl('delete', 'pod', '-n', 'ui-filter', 'filter-live-pod', '--grace-period=0', '--force', '--wait=false');
    kubectl('delete', 'resourceclaim', '-n', 'ui-filter', 'filter-live', '--wait=false');
    const gone = await eventually(() => !kubectl('get', 'resourceclaims', '-n', 'ui-filter', '-o', 'name').split('\n')
      .includes('resourceclaim.resource.k8s.io/filter-live') && !onNode(seedNode).includes('ui-filter/filter-live'));
    expect(gone === true, 'kubectl shows filter-live gone');
    await rowsAre(onNode(seedNode), 5000);

    const reads = clusterWide(requests.urls);
    expect(reads.length === 0, `a node, namespace or device filter lists no claim cluster-wide: ${reads.join(' ')}`);
    expect(requests.urls.some((u) => u.startsWith('/apis/resource.k8s.io/v1/namespaces/ui-filter/resourceclaims?limit=')),
      `the namespace's claims are listed page by page: ${requests.urls.join(' ')}`);
    expect(reviews.some((r) => (r.spec?.pools || []).length > 0), `the node's holders come from DeviceHolderReviews: ${JSON.stringify(reviews)}`);
    await page.waitForTimeout(1600); // a collection left stops 1.5 s later
    expect(!openWatches().some((u) => u.startsWith('/apis/resource.k8s.io/v1/resourceclaims')),
      `no cluster-wide claim watch: ${openWatches().join(' ')}`);

    // Free text: every claim's pages, each with a limit, filtered here.
    const before = requests.urls.length;
    await page.getByLabel('Filter').fill('filter-live');
    await count.filter({ hasText: /matching “filter-live”/ }).waitFor();
    await rowsAre(allocated().filter((c) => keyOf(c).includes('filter-live')).map(keyOf).sort());
    const textReads = clusterWide(requests.urls.slice(before)).filter((u) => !/watch=1/.test(u));
    expect(textReads.length > 0 && textReads.every((u) => /[?&]limit=\d+/.test(u)),
      `free text lists claims page by page: ${textReads.join(' ')}`);
    await shot('assignments-filter-text');
  } finally {
    requests.stop();
    stopReviews();
    await page.getByLabel('Filter').fill('');
    kubectl('delete', 'pod', '-n', 'ui-filter', '--all', '--grace-period=0', '--force', '--wait=false');
    kubectl('delete', 'resourceclaim', '-n', 'ui-filter', '--all', '--wait=false');
  }
});

// A consumable-capacity device (allowMultipleAllocations, memory 40Gi handed out in 5Gi steps
// from 5Gi) on gpu-node-b, its class, and two claims that each take a share of it: 20Gi, and
// 12Gi (rounded up to 15Gi by the capacity's request policy), each with a pod.
const SHARED_DEVICE = 'shared.example.com/gpu-node-b-shared/vgpu-0';
const SHARED_INVENTORY = `apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: gpu-node-b-shared.example.com}
spec:
  driver: shared.example.com
  nodeName: gpu-node-b
  pool: {name: gpu-node-b-shared, generation: 1, resourceSliceCount: 1}
  devices:
  - name: vgpu-0
    allowMultipleAllocations: true
    attributes:
      type: {string: shared-gpu}
    capacity:
      memory:
        value: 40Gi
        requestPolicy:
          default: 10Gi
          validRange: {min: 5Gi, step: 5Gi}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: shared.example.com}
spec:
  selectors:
  - cel: {expression: "device.driver == 'shared.example.com'"}
---
apiVersion: v1
kind: Namespace
metadata: {name: ui-share}
`;
const shareClaim = (name, memory) => `apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: ${name}, namespace: ui-share}
spec:
  devices:
    requests:
    - name: vgpu
      exactly:
        deviceClassName: shared.example.com
        capacity: {requests: {memory: ${memory}}}
---
apiVersion: v1
kind: Pod
metadata: {name: ${name}-pod, namespace: ui-share}
spec:
  resourceClaims: [{name: vgpu, resourceClaimName: ${name}}]
  containers:
  - name: c
    image: busybox
    resources: {claims: [{name: vgpu}]}
`;

await step('Assignments: two claims sharing one consumable-capacity device show their shares and what each consumes', async () => {
  kubectlApply(SHARED_INVENTORY);
  kubectlApply(shareClaim('share-a', '20Gi') + '---\n' + shareClaim('share-b', '12Gi'));
  try {
    const resultOf = (claim) => JSON.parse(kubectl('get', 'resourceclaim', '-n', 'ui-share', claim, '-o', 'json'))
      .status?.allocation?.devices?.results || [];
    const allocated = await eventually(() => resultOf('share-a').length === 1 && resultOf('share-b').length === 1);
    expect(allocated === true, 'kubectl shows both claims allocated');
    const [a] = resultOf('share-a');
    const [b] = resultOf('share-b');
    // kubectl: the same device, two shares, the capacity each consumes after the policy.
    expect(`${a.driver}/${a.pool}/${a.device}` === SHARED_DEVICE && `${b.driver}/${b.pool}/${b.device}` === SHARED_DEVICE,
      `kubectl: ${JSON.stringify([a, b])}`);
    const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
    expect(uuid.test(a.shareID) && uuid.test(b.shareID) && a.shareID !== b.shareID, `share ids: ${a.shareID} ${b.shareID}`);
    expect(JSON.stringify(a.consumedCapacity) === '{"memory":"20Gi"}' && JSON.stringify(b.consumedCapacity) === '{"memory":"15Gi"}',
      `consumed: ${JSON.stringify(a.consumedCapacity)} ${JSON.stringify(b.consumedCapacity)}`);

    // By claim: each claim's device with its share and what it consumes.
    await nav('Assignments');
    const deviceItem = (claim) => page.locator(`tr[data-claim="ui-share/${claim}"] td:nth-child(2) li`);
    for (const [claim, r, memory] of [['share-a', a, '20Gi'], ['share-b', b, '15Gi']]) {
      const item = deviceItem(claim);
      await item.waitFor();
      const text = await item.textContent();
      expect(text === `${SHARED_DEVICE} (vgpu) share ${r.shareID.slice(0, 8)} memory: ${memory}`, `${claim}: ${text}`);
      expect((await item.locator('.badge').allTextContents()).join() === `share ${r.shareID.slice(0, 8)}`, `${claim}'s badge`);
      const consumers = await page.locator(`tr[data-claim="ui-share/${claim}"] td:nth-child(4) li`).allTextContents();
      expect(consumers.join() === `pod ${claim}-pod`, `${claim}'s consumers: ${consumers}`);
    }
    await shot('assignments-shares');
    // By device: the one device held by both claims, each as a share with its capacity.
    await page.getByRole('group', { name: 'View' }).getByRole('button', { name: 'By device' }).click();
    const row = page.locator(`tr[data-device="${SHARED_DEVICE}"]`);
    await row.locator('[data-holder="ui-share/share-b"]').waitFor();
    const holders = (await row.locator('[data-holder]').evaluateAll((hs) => hs.map((h) => `${h.dataset.holder}: ${h.textContent}`))).sort();
    const want = [['share-a', '20Gi'], ['share-b', '15Gi']].map(([claim, memory]) =>
      new RegExp(`^ui-share/${claim}: shareclaim ui-share/${claim} \\(request vgpu\\) memory: ${memory}pods ${claim}-pod; claim created `));
    expect(holders.length === 2 && want.every((re, i) => re.test(holders[i])), `holders: ${JSON.stringify(holders)}`);
    await shot('assignments-shares-by-device');
    await page.getByRole('group', { name: 'View' }).getByRole('button', { name: 'By claim' }).click();
  } finally {
    kubectl('delete', 'pod', '-n', 'ui-share', '--all', '--grace-period=0', '--force', '--wait=false');
    kubectl('delete', 'resourceclaim', '-n', 'ui-share', '--all', '--wait=false');
  }
  // The slice and class go once the claims are released (the devices a later step counts).
  const released = await eventually(() => kubectl('get', 'resourceclaims', '-n', 'ui-share', '-o', 'name') === '');
  expect(released === true, 'kubectl shows the shared claims gone');
  kubectl('delete', 'resourceslice', 'gpu-node-b-shared.example.com');
  kubectl('delete', 'deviceclass', 'shared.example.com');
});

const SCALE_NODES = 1000;

await step(`Inventory at scale: ${SCALE_NODES} more nodes load page by page, a window of rows is drawn, arrow keys move the focus, events update one row`, async () => {
  // Created through the API from the page (the admin's token), 16 requests at a time.
  await page.evaluate(async (count) => {
    const token = sessionStorage.getItem('quartermaster.token');
    let next = 0;
    const worker = async () => {
      for (let i = next++; i < count; i = next++) {
        const name = `ui-scale-${String(i).padStart(4, '0')}`;
        const res = await fetch('/api/v1/nodes', {
          method: 'POST',
          headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
          body: JSON.stringify({ apiVersion: 'v1', kind: 'Node', metadata: { name, labels: { 'kubernetes.io/hostname': name } }, spec: {} }),
        });
        if (res.status !== 201) throw new Error(`${name}: ${res.status}`);
      }
    };
    await Promise.all(Array.from({ length: 16 }, worker));
  }, SCALE_NODES);
  const total = SCALE_NODES + 4; // the three sample nodes and mig-node
  await nav('Inventory');
  const rows = page.locator('table.nodes tr[data-node]');
  await page.locator('tr[data-node="gpu-node-a"]').waitFor();
  // Only the first page is loaded, and only the rows in view (and a few more) are drawn.
  const first = await inventoryCount().textContent();
  expect(/^100 of 100\+ nodes/.test(first), `the first page only: ${first}`);
  const drawn = await rows.count();
  expect(drawn > 5 && drawn < 60, `rows drawn at first: ${drawn}`);
  expect((await page.locator('table.nodes').getAttribute('aria-rowcount')) === '-1', 'the row count is unknown while pages remain');
  await shotView('inventory-scale');
  // Scrolling to the end loads the next pages.
  let countText = '';
  await eventually(async () => {
    await page.evaluate(() => window.scrollTo(0, document.documentElement.scrollHeight));
    countText = await inventoryCount().textContent();
    return countText.startsWith(`${total} of ${total} nodes`);
  }, 60_000);
  expect(countText.startsWith(`${total} of ${total} nodes`), `after scrolling to the end: ${countText}`);
  await page.locator(`tr[data-node="ui-scale-${String(SCALE_NODES - 1).padStart(4, '0')}"]`).waitFor();
  const drawnAtEnd = await rows.count();
  expect(drawnAtEnd < 60, `rows drawn at the end: ${drawnAtEnd} of ${total}`);
  expect((await page.locator('table.nodes').getAttribute('aria-rowcount')) === String(total + 1), 'aria-rowcount counts every row');
  expect((await page.locator('tr[data-node="gpu-node-a"]').count()) === 0, 'the first rows are no longer drawn');
  await shotView('inventory-scale-end');
  // Keyboard: from the first row's Cordon button, ArrowDown moves to the same button of the
  // next rows (drawn as the focus moves), with the focus visible.
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.getByRole('button', { name: 'Cordon gpu-node-a' }).focus();
  for (let i = 0; i < 40; i++) await page.keyboard.press('ArrowDown');
  let focused = '';
  await eventually(async () => {
    focused = await page.evaluate(() => document.activeElement?.getAttribute('aria-label'));
    return focused === 'Cordon ui-scale-0036';
  }, 5_000);
  expect(focused === 'Cordon ui-scale-0036', `focus after 40 x ArrowDown: ${focused}`);
  const inView = await page.evaluate(() => {
    const r = document.activeElement.getBoundingClientRect();
    return r.top >= 0 && r.bottom <= window.innerHeight && document.activeElement.matches(':focus-visible');
  });
  expect(inView, 'the focused button is in view and its focus visible');
  await page.keyboard.press('ArrowUp');
  expect((await page.evaluate(() => document.activeElement?.getAttribute('aria-label'))) === 'Cordon ui-scale-0035', 'ArrowUp moves back');
  await shotView('inventory-scale-keyboard');
  // A watch event updates its row (kubectl cordon of a loaded node).
  kubectl('cordon', 'ui-scale-0035');
  await page.locator('tr[data-node="ui-scale-0035"]').getByText('SchedulingDisabled').waitFor();
  expect((await page.locator('tr[data-node="ui-scale-0034"]').getByText('Schedulable', { exact: true }).count()) === 1, 'its neighbour unchanged');
  kubectl('uncordon', 'ui-scale-0035');
  // The text filter covers every node (the pages are loaded while it is set).
  await page.getByLabel('Filter', { exact: true }).fill('ui-scale-09');
  await inventoryCount().filter({ hasText: new RegExp(`^100 of ${total} nodes`) }).waitFor();
  await page.getByLabel('Filter', { exact: true }).fill('');
});

await step('sign out returns to the form and forgets the token', async () => {
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByLabel('Token').waitFor();
  expect((await page.evaluate(() => sessionStorage.length)) === 0, 'token removed');
});

await step('a view user sees everything and can edit nothing', async () => {
  kubectlApply(`apiVersion: resource.k8s.io/v1
kind: DeviceTaintRule
metadata: {name: held-gpu-2}
spec:
  deviceSelector: {driver: gpu.nvidia.com, pool: gpu-node-a, device: gpu-2}
  taint: {key: example.com/held, effect: NoSchedule}
`);
  await signIn(env.QM_VIEW_TOKEN);
  await page.getByRole('heading', { name: 'Overview' }).waitFor();
  await nav('Device classes');
  const create = page.getByRole('button', { name: 'Create device class' });
  await page.getByRole('note').filter({ hasText: 'may not create deviceclasses.resource.k8s.io' }).waitFor();
  expect(await create.isDisabled(), 'Create device class is disabled');
  await page.locator('[data-class="ui-h100"] [data-testid=matches]').filter({ hasText: '8 devices' }).waitFor();
  await page.getByRole('link', { name: 'ui-h100' }).click();
  await page.getByTestId('preview-summary').filter({ hasText: 'Matches 8 devices' }).waitFor();
  expect(await page.getByRole('button', { name: 'Save' }).isDisabled(), 'Save is disabled');
  expect(await page.getByRole('button', { name: 'Delete' }).isDisabled(), 'Delete is disabled');
  await shot('view-user-device-class');
  await nav('Inventory');
  await page.getByRole('note').filter({ hasText: 'may not patch nodes' }).waitFor();
  expect(await page.getByRole('button', { name: 'Cordon gpu-node-a' }).isDisabled(), 'Cordon is disabled');
  await page.getByRole('note').filter({ hasText: 'may not create devicetaintrules.resource.k8s.io' }).waitFor();
  await page.getByRole('button', { name: 'gpu-node-a', exact: true }).click();
  const add = page.getByRole('button', { name: 'Add taint to gpu-node-a/gpu-0' });
  expect(await add.isDisabled(), 'Add taint is disabled');
  expect((await add.getAttribute('title')).includes('may not create devicetaintrules'), 'it says why');
  const remove = page.getByRole('button', { name: 'Remove taint example.com/held from gpu-node-a/gpu-2' });
  expect(await remove.isDisabled(), 'Remove taint is disabled');
  expect((await remove.getAttribute('title')).includes('may not delete devicetaintrules'), 'it says why');
  await shot('view-user-inventory');
  // Quotas: listed with used and hard, Edit disabled with the reason (the page's and the row's).
  await nav('Quotas');
  await page.getByRole('note').filter({ hasText: 'may not patch resourcequotas' }).waitFor();
  const edit = page.getByRole('button', { name: 'Edit quota dra-test/gpus' });
  // (the title is set once the access review has answered)
  const why = await eventually(() => edit.getAttribute('title'));
  expect(why?.startsWith('Read-only: your identity may not patch resourcequotas in namespace dra-test ('), `it says why: ${why}`);
  expect(await edit.isDisabled(), 'Edit is disabled');
  expect((await page.locator('tr[data-quota="dra-test/gpus"]').getByText('a100-80g.deviceclass.resource.k8s.io/devices').count()) === 1,
    'the quota is shown');
  await shot('view-user-quotas');
  // The other pages have no control that changes anything: Assignments (its view switch) and
  // Pending (none), while they show what the admin sees.
  const buttons = () => page.locator('main').getByRole('button').evaluateAll((bs) => bs.map((b) => b.textContent));
  await nav('Assignments');
  await page.locator('tr[data-claim="dra-test/gpu-claim"]').getByText('shared by 2').waitFor();
  expect(JSON.stringify(await buttons()) === '["By claim","By device"]', `Assignments' buttons: ${await buttons()}`);
  await nav('Pending');
  await page.locator('tr[data-pod="dra-test/waits-for-gpus"]').getByText('Unschedulable', { exact: true }).waitFor();
  expect(JSON.stringify(await buttons()) === '[]', `Pending's buttons: ${await buttons()}`);
});

await step('a 401 from the API returns to the form with a message', async () => {
  kubectl('delete', 'serviceaccount', 'ui-viewer', '-n', 'default'); // invalidates its tokens
  // The Audit page's first request gets the 401; the form may replace the page before its
  // heading shows, so only the click is awaited.
  await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Audit', exact: true }).click();
  await page.getByLabel('Token').waitFor();
  await page.getByRole('alert').filter({ hasText: '401' }).waitFor();
  await shot('sign-in-after-401');
});

await browser.close();
const unexpected = consoleErrors.filter((e) => !/401|403|Unauthorized|Forbidden|422/.test(e));
if (unexpected.length) {
  console.log(`FAIL: browser console errors:\n    ${unexpected.join('\n    ')}`);
  if (errorResponses.length) console.log(`  responses:\n    ${errorResponses.join('\n    ')}`);
  failures++;
}
console.log(`first meaningful render of the overview after sign-in: ${firstRenderMs} ms`);
console.log(`2 s bounds, from the kubectl command's return: ${bounds.join('; ')}`);
console.log(`${checks - failures}/${checks} checks passed; screenshots in ${SHOTS}`);
process.exit(failures ? 1 : 0);
