// Driven by bench/ui_scale.sh (which applies the seed claim and its pod): loads the inventory
// (nodes with 8 GPUs each, one bound pod and one ResourceClaim per node, one pod that cannot be
// placed), then times each page's first
// meaningful render in headless Chromium (navigation start to the page's numbers on screen), with
// the bytes the page fetched by then and 3 s later and its JS heap then (last run); then, on
// Inventory: the rows in the DOM, scrolling through every node (two frames per 1,200 px step)
// and which node rows one watch event re-renders (a React fiber walk through the devtools hook).
// With QM_WEB_BEFORE=<another build of the UI> every page is timed with both builds, runs
// interleaved, against the same server and data (that build's files are served through
// Playwright's request interception).
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';

const env = process.env;
const require = createRequire(path.join(env.QM_WEB_SRC, 'package.json'));
const { chromium } = require('playwright-core');
const URL = env.QM_URL;
const TOKEN = env.QM_ADMIN_TOKEN;
const NODES = Number(env.QM_NODES);
const RUNS = Number(env.QM_RUNS);
const BEFORE = env.QM_WEB_BEFORE || '';

async function post(p, body) {
  const res = await fetch(URL + p, {
    method: 'POST',
    headers: { Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (res.status !== 201) throw new Error(`${p}: ${res.status} ${await res.text()}`);
}

const models = [
  ['NVIDIA H100 80GB HBM3', 'Hopper', '9.0.0', '80Gi'],
  ['NVIDIA A100-SXM4-80GB', 'Ampere', '8.0.0', '80Gi'],
  ['NVIDIA L4', 'Ada Lovelace', '8.9.0', '24Gi'],
];

async function load() {
  const started = Date.now();
  let next = 0;
  async function worker() {
    for (;;) {
      const i = next++;
      if (i >= NODES) return;
      const name = `scale-node-${String(i).padStart(5, '0')}`;
      const [product, arch, cc, memory] = models[i % models.length];
      await post('/api/v1/nodes', {
        apiVersion: 'v1', kind: 'Node',
        metadata: { name, labels: { 'kubernetes.io/hostname': name, 'nvidia.com/gpu.product': product.replaceAll(' ', '-') } },
        spec: {},
      });
      const devices = [];
      for (let d = 0; d < 8; d++) {
        devices.push({
          name: `gpu-${d}`,
          attributes: {
            type: { string: 'gpu' }, productName: { string: product }, brand: { string: 'Nvidia' },
            architecture: { string: arch }, cudaComputeCapability: { version: cc },
            driverVersion: { version: '560.35.3' }, uuid: { string: `GPU-${i}-${d}` },
            'resource.kubernetes.io/pcieRoot': { string: `pci0000:0${d >> 2}` },
          },
          capacity: { memory: { value: memory } },
        });
      }
      await post('/apis/resource.k8s.io/v1/resourceslices', {
        apiVersion: 'resource.k8s.io/v1', kind: 'ResourceSlice',
        metadata: { name: `${name}-gpu.nvidia.com` },
        spec: { driver: 'gpu.nvidia.com', nodeName: name, pool: { name, generation: 1, resourceSliceCount: 1 }, devices },
      });
      // A pod running there (bound at creation; it tolerates every taint, so nothing evicts it)
      // and a claim nobody uses yet: what the Overview, Pending and Inventory must not list whole.
      await post('/api/v1/namespaces/default/pods', {
        apiVersion: 'v1', kind: 'Pod',
        metadata: { name: `${name}-job`, namespace: 'default' },
        spec: { nodeName: name, tolerations: [{ operator: 'Exists' }], containers: [{ name: 'c', image: 'busybox' }] },
      });
      await post('/apis/resource.k8s.io/v1/namespaces/default/resourceclaims', {
        apiVersion: 'resource.k8s.io/v1', kind: 'ResourceClaim',
        metadata: { name: `${name}-claim`, namespace: 'default' },
        spec: { devices: { requests: [{ name: 'gpu', exactly: { deviceClassName: 'gpu.nvidia.com' } }] } },
      });
    }
  }
  await Promise.all(Array.from({ length: 16 }, worker));
  // One pod no node can take (9 GPUs of one node): the Pending page's row.
  await post('/apis/resource.k8s.io/v1/namespaces/default/resourceclaims', {
    apiVersion: 'resource.k8s.io/v1', kind: 'ResourceClaim',
    metadata: { name: 'scale-too-many', namespace: 'default' },
    spec: { devices: { requests: [{ name: 'gpus', exactly: { deviceClassName: 'gpu.nvidia.com', allocationMode: 'ExactCount', count: 9 } }] } },
  });
  await post('/api/v1/namespaces/default/pods', {
    apiVersion: 'v1', kind: 'Pod',
    metadata: { name: 'scale-waits', namespace: 'default' },
    spec: {
      resourceClaims: [{ name: 'gpus', resourceClaimName: 'scale-too-many' }],
      containers: [{ name: 'c', image: 'busybox', resources: { claims: [{ name: 'gpus' }] } }],
    },
  });
  console.log(`loaded ${NODES} nodes x 8 devices, ${NODES} pods and ${NODES} claims in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}

const devices = String(NODES * 8 + 18);
const pages = [
  ['Overview', '/', async (page) => {
    await page.getByTestId('count-devices').filter({ hasText: new RegExp(`^${devices}$`) }).waitFor();
  }],
  ['Overview (node counts complete)', '/', async (page) => {
    await page.getByTestId('count-nodes').filter({ hasText: new RegExp(`^${NODES + 3}$`) }).waitFor();
  }],
  ['Pending (the waiting pod explained)', '/pending', async (page) => {
    await page.locator('tr', { hasText: 'scale-waits' }).getByText('Unschedulable').waitFor();
  }],
  ['Assignments by device (the seed GPU with its model)', '/assignments?view=device', async (page) => {
    await page.locator('tr[data-device] [data-holder="dra-test/gpu-claim"]').waitFor();
    await page.locator('tr[data-device]', { has: page.locator('[data-holder="dra-test/gpu-claim"]') })
      .locator('th').filter({ hasText: /NVIDIA/ }).waitFor();
  }],
  ['Inventory', '/inventory', async (page) => {
    await page.locator('tr[data-node="gpu-node-a"]').waitFor();
  }],
  ['Device classes', '/device-classes', async (page) => {
    await page.locator('tr[data-class] td[data-testid="in-use"]').first().waitFor();
    await page.waitForFunction(() => {
      const cells = [...document.querySelectorAll('tr[data-class] td[data-testid="matches"]')];
      return cells.length > 0 && cells.every((c) => /devices on/.test(c.textContent || ''));
    }, null, { timeout: 60_000, polling: 20 });
  }],
];

await load();
const browser = await chromium.launch({
  executablePath: env.QM_CHROMIUM,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--enable-precise-memory-info'],
});
async function newContext() {
  const c = await browser.newContext({ ignoreHTTPSErrors: true, viewport: { width: 1400, height: 900 } });
  c.setDefaultTimeout(60_000);
  await c.addInitScript((t) => sessionStorage.setItem('quartermaster.token', t), TOKEN);
  await c.addInitScript(() => performance.setResourceTimingBufferSize(100000));
  return c;
}
const context = await newContext();
const variants = [['', context]];
if (BEFORE) {
  // The other build's files for every request outside the API (client routes get index.html).
  const before = await newContext();
  const api = /^\/(api|apis|openapi|version|healthz|livez|readyz|metrics|logs|debug|\.well-known)(\/|$)/;
  const types = { '.js': 'text/javascript', '.css': 'text/css', '.html': 'text/html', '.svg': 'image/svg+xml' };
  await before.route((u) => u.origin === new globalThis.URL(URL).origin && !api.test(u.pathname), async (route) => {
    const p = new globalThis.URL(route.request().url()).pathname;
    const file = p.startsWith('/assets/') ? path.join(BEFORE, p) : path.join(BEFORE, 'index.html');
    route.fulfill({ status: 200, body: await readFile(file), contentType: types[path.extname(file)] || 'application/octet-stream' });
  });
  variants.unshift(['before: ', before]);
  variants[1][0] = 'after:  ';
}
// Bytes fetched so far (completed responses; a watch counts once it ends), the API's by kind
// (the largest three), and the JS heap.
const fetched = (page) => page.evaluate(() => {
  const entries = performance.getEntriesByType('resource');
  const size = (e) => e.transferSize || e.encodedBodySize || 0;
  const kinds = {};
  for (const e of entries) {
    const m = /\/apis?\/(?:[^?]*\/)?([a-z]+)(?:\?|$)/.exec(new URL(e.name).pathname + '?');
    if (m && /\/apis?\//.test(e.name)) kinds[m[1]] = (kinds[m[1]] || 0) + size(e);
  }
  const top = Object.entries(kinds).sort((a, b) => b[1] - a[1]).slice(0, 3)
    .map(([k, n]) => `${k} ${Math.round(n / 1024)}`).join(', ');
  return {
    kb: Math.round(entries.reduce((n, e) => n + size(e), 0) / 1024),
    top,
    heapMb: Math.round((performance.memory?.usedJSHeapSize || 0) / 1048576),
  };
});
const results = [];
for (const [name, route, ready] of pages) {
  const times = variants.map(() => []);
  const sizes = variants.map(() => '');
  for (let r = 0; r < RUNS; r++) {
    for (const [v, [, ctx]] of variants.entries()) {
      const page = await ctx.newPage();
      const t0 = Date.now();
      await page.goto(URL + route);
      await ready(page);
      times[v].push(Date.now() - t0);
      if (r === RUNS - 1) {
        const atReady = await fetched(page);
        await page.waitForTimeout(3000);
        const later = await fetched(page);
        sizes[v] = `; ${atReady.kb} KB fetched by then, ${later.kb} KB 3 s later (${later.top} KB), JS heap ${later.heapMb} MB`;
      }
      if (env.QM_TRACE && r === RUNS - 1) {
        // Where the time went: each request's start and end (ms after navigation).
        const entries = await page.evaluate(() => performance.getEntriesByType('resource').map((e) =>
          `${Math.round(e.startTime)}-${Math.round(e.responseEnd)} ${e.name.replace(location.origin, '')}`));
        console.log(`${variants[v][0]}${name}:\n    ${entries.join('\n    ')}`);
      }
      await page.close();
    }
  }
  for (const [v, [label]] of variants.entries()) {
    const t = times[v].sort((a, b) => a - b);
    results.push(`${label}${name} ${(t[Math.floor(t.length / 2)] / 1000).toFixed(2)} s (runs: ${t.join(', ')} ms${sizes[v]})`);
  }
}

// Which node rows re-render: a row component re-rendered when its props or its hook state
// object changed since the last commit (keyed by the row's <tr>).
await context.addInitScript(() => {
  const seen = new WeakMap();
  window.__rowRenders = {};
  window.__REACT_DEVTOOLS_GLOBAL_HOOK__ = {
    supportsFiber: true, renderers: new Map(), inject() { return 1; }, checkDCE() {},
    onCommitFiberUnmount() {}, onPostCommitFiberRoot() {}, onScheduleFiberRoot() {},
    onCommitFiberRoot(_, root) {
      const stack = [root.current];
      while (stack.length) {
        const f = stack.pop();
        if (f.child) stack.push(f.child);
        if (f.sibling) stack.push(f.sibling);
        if (![0, 11, 14, 15].includes(f.tag)) continue;
        let h = f.child;
        while (h && h.tag !== 5) h = h.child;
        if (!h || h.type !== 'tr' || !h.memoizedProps['data-node']) continue;
        if (h.return !== f && h.return?.return !== f) continue;
        const prev = seen.get(h.stateNode);
        if (!prev || prev.p !== f.memoizedProps || prev.s !== f.memoizedState) {
          const n = h.memoizedProps['data-node'];
          window.__rowRenders[n] = (window.__rowRenders[n] || 0) + 1;
        }
        seen.set(h.stateNode, { p: f.memoizedProps, s: f.memoizedState });
      }
    },
  };
});
const page = await context.newPage();
await page.goto(URL + '/inventory');
const target = 'scale-node-00005';
await page.locator(`tr[data-node="${target}"]`).waitFor();
await page.waitForTimeout(2000);
const rowsDrawn = await page.locator('tr').count();
await page.evaluate(() => { window.__rowRenders = {}; });
const res = await fetch(`${URL}/api/v1/nodes/${target}`, {
  method: 'PATCH',
  headers: { Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/merge-patch+json' },
  body: JSON.stringify({ spec: { unschedulable: true } }),
});
if (res.status !== 200) throw new Error(`cordon: ${res.status}`);
await page.locator(`tr[data-node="${target}"]`).getByText('SchedulingDisabled').waitFor();
await page.waitForTimeout(1000);
const renders = await page.evaluate(() => window.__rowRenders);
// Every page loaded (a filter set and cleared), then scrolled through from the top.
await page.getByLabel('Filter', { exact: true }).fill('node');
await page.getByTestId('inventory-count').filter({ hasText: new RegExp(`of ${NODES + 3} nodes`) }).waitFor();
await page.getByLabel('Filter', { exact: true }).fill('');
await page.waitForTimeout(1000);
const scroll = await page.evaluate(async () => {
  const frame = () => new Promise((r) => requestAnimationFrame(() => r()));
  const times = [];
  let rows = 0;
  window.scrollTo(0, 0);
  await frame();
  while (window.scrollY + window.innerHeight < document.documentElement.scrollHeight - 10) {
    const t0 = performance.now();
    window.scrollBy(0, 1200);
    await frame();
    await frame();
    times.push(performance.now() - t0);
    rows = Math.max(rows, document.querySelectorAll('tr').length);
  }
  times.sort((a, b) => a - b);
  const at = (q) => times[Math.min(times.length - 1, Math.floor(q * times.length))].toFixed(0);
  return `${times.length} steps: median ${at(0.5)} ms, p95 ${at(0.95)} ms, max ${at(1)} ms; at most ${rows} rows in the DOM`;
});
await browser.close();
console.log(`first meaningful render with ${NODES} nodes x 8 devices (${devices} devices):`);
for (const r of results) console.log(`  ${r}`);
console.log(`Inventory: ${rowsDrawn} table rows in the DOM after the first page`);
console.log(`Inventory: one cordon of ${target} re-rendered the node rows ${JSON.stringify(renders)}`);
console.log(`Inventory: scrolling through all ${NODES + 3} nodes, two frames per 1,200 px: ${scroll}`);
