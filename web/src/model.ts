// Derived views over the live collections: devices from ResourceSlices, allocations from
// ResourceClaims, readiness and pending reasons from nodes and pods.
import { Json, K8sObject, attributeText } from './api';

export interface DeviceRow {
  id: string; // driver/pool/device
  driver: string;
  pool: string;
  name: string;
  node: string; // '' when not bound to one node
  slice: string;
  attributes: Record<string, Json>;
  capacity: Record<string, { value: string }>;
  taints: { key: string; value?: string; effect: string }[];
  model: string;
  // The shared counters the device takes while allocated (MIG partitions of one GPU).
  consumes: { counterSet: string; counters: Record<string, { value: string }> }[];
}

export interface Taint {
  key: string;
  value?: string;
  effect: string;
}

export function deviceModel(attributes: Record<string, Json>, driver: string): string {
  for (const k of ['productName', `${driver}/productName`, 'model', 'type']) {
    if (attributes[k] !== undefined) return attributeText(attributes[k]);
  }
  return driver;
}

// The devices of one slice, computed once per slice object (a watch event replaces the object,
// so unchanged slices keep their rows, and rows memoized on them do not re-render).
const sliceDevices = new WeakMap<K8sObject, DeviceRow[]>();

function devicesOfSlice(s: K8sObject): DeviceRow[] {
  let out = sliceDevices.get(s);
  if (out) return out;
  out = [];
  const spec = s.spec || {};
  const pool = spec.pool?.name || '';
  for (const d of spec.devices || []) {
    const attributes = d.attributes || {};
    out.push({
      id: `${spec.driver}/${pool}/${d.name}`,
      driver: spec.driver,
      pool,
      name: d.name,
      node: spec.perDeviceNodeSelection ? d.nodeName || '' : spec.nodeName || '',
      slice: s.metadata.name,
      attributes,
      capacity: d.capacity || {},
      taints: d.taints || [],
      model: deviceModel(attributes, spec.driver),
      consumes: d.consumesCounters || [],
    });
  }
  sliceDevices.set(s, out);
  return out;
}

// Devices of the newest generation of every pool.
export function devicesOf(slices: K8sObject[]): DeviceRow[] {
  const newest = new Map<string, number>();
  for (const s of slices) {
    const key = `${s.spec?.driver}/${s.spec?.pool?.name}`;
    newest.set(key, Math.max(newest.get(key) ?? 0, s.spec?.pool?.generation ?? 0));
  }
  const out: DeviceRow[] = [];
  for (const s of slices) {
    const spec = s.spec || {};
    const pool = spec.pool?.name || '';
    if ((spec.pool?.generation ?? 0) < (newest.get(`${spec.driver}/${pool}`) ?? 0)) continue;
    for (const d of devicesOfSlice(s)) out.push(d);
  }
  return out;
}

export interface Holder {
  claim: string; // namespace/name
  request: string;
  shareId?: string;
  consumedCapacity?: Record<string, string>;
  // From a DeviceHolderReview: the claim's consumer pods, creation time and allocation node.
  pods?: string[];
  claimCreated?: string;
  node?: string;
}

// driver/pool/device -> the claims holding it now.
export function allocationsOf(claims: K8sObject[]): Map<string, Holder[]> {
  const out = new Map<string, Holder[]>();
  for (const c of claims) {
    for (const r of c.status?.allocation?.devices?.results || []) {
      if (r.adminAccess) continue;
      const id = `${r.driver}/${r.pool}/${r.device}`;
      const list = out.get(id) || [];
      list.push({
        claim: `${c.metadata.namespace}/${c.metadata.name}`,
        request: r.request,
        shareId: r.shareID,
        consumedCapacity: r.consumedCapacity,
      });
      out.set(id, list);
    }
  }
  return out;
}

const allocationCache = new WeakMap<K8sObject[], Map<string, Holder[]>>();
let lastAllocations = new Map<string, Holder[]>();

// Whether two holder lists show the same (a device whose holders did not change keeps its array).
export function sameHolders(a: Holder[], b: Holder[]): boolean {
  return (
    a.length === b.length &&
    a.every(
      (h, i) =>
        h.claim === b[i].claim &&
        h.request === b[i].request &&
        h.shareId === b[i].shareId &&
        h.claimCreated === b[i].claimCreated &&
        h.node === b[i].node &&
        (h.pods || []).join(',') === (b[i].pods || []).join(',') &&
        JSON.stringify(h.consumedCapacity) === JSON.stringify(b[i].consumedCapacity),
    )
  );
}

// allocationsOf, computed once per published list of claims (the rows that ask share it); a
// device whose holders did not change keeps the same array, so its memoized row does not
// re-render.
export function allocationsFor(claims: K8sObject[]): Map<string, Holder[]> {
  let m = allocationCache.get(claims);
  if (!m) {
    m = allocationsOf(claims);
    for (const [id, holders] of m) {
      const before = lastAllocations.get(id);
      if (before && sameHolders(before, holders)) m.set(id, before);
    }
    allocationCache.set(claims, m);
    lastAllocations = m;
  }
  return m;
}

export function nodeReady(node: K8sObject): 'True' | 'False' | 'Unknown' {
  const c = (node.status?.conditions || []).find((x: Json) => x.type === 'Ready');
  return c ? c.status : 'Unknown';
}

// The node an allocation is bound to (its node selector names one node), if any.
export function allocationNode(claim: K8sObject, devices: Map<string, DeviceRow>): string {
  const alloc = claim.status?.allocation;
  if (!alloc) return '';
  for (const term of alloc.nodeSelector?.nodeSelectorTerms || []) {
    for (const f of term.matchFields || []) {
      if (f.key === 'metadata.name' && f.values?.length === 1) return f.values[0];
    }
  }
  for (const r of alloc.devices?.results || []) {
    const d = devices.get(`${r.driver}/${r.pool}/${r.device}`);
    if (d?.node) return d.node;
  }
  return '';
}

export interface PendingPod {
  pod: K8sObject;
  reason: string;
  message: string;
}

// Once per pod object: an unchanged pod keeps its entry (and a memoized row of it its props).
const pendingOf = new WeakMap<K8sObject, PendingPod | null>();

function pendingPod(p: K8sObject): PendingPod | null {
  if (p.spec?.nodeName) return null;
  if (p.metadata && (p.metadata as Json).deletionTimestamp) return null;
  const c = (p.status?.conditions || []).find((x: Json) => x.type === 'PodScheduled');
  if (c && c.status === 'False') {
    return { pod: p, reason: c.reason || 'Unschedulable', message: c.message || '' };
  }
  if (!c) return { pod: p, reason: 'NotYetScheduled', message: 'waiting for the scheduler' };
  return null;
}

export function pendingPods(pods: K8sObject[]): PendingPod[] {
  const out: PendingPod[] = [];
  for (const p of pods) {
    let entry = pendingOf.get(p);
    if (entry === undefined) {
      entry = pendingPod(p);
      pendingOf.set(p, entry);
    }
    if (entry) out.push(entry);
  }
  return out;
}

// The device classes a claim's requests name.
export function classesOfClaim(claim: K8sObject): string[] {
  const out = new Set<string>();
  for (const r of claim.spec?.devices?.requests || []) {
    if (r.exactly?.deviceClassName) out.add(r.exactly.deviceClassName);
    for (const s of r.firstAvailable || []) if (s.deviceClassName) out.add(s.deviceClassName);
  }
  return Array.from(out);
}

// --- Shared counters (partitionable devices, e.g. MIG) ----------------------------------------

export interface CounterSetRow {
  id: string; // driver/pool/name
  driver: string;
  pool: string;
  name: string;
  node: string;
  counters: Record<string, { value: string }>;
}

// The counter sets of the newest generation of every pool (published in slices of their own).
export function counterSetsOf(slices: K8sObject[]): CounterSetRow[] {
  const newest = new Map<string, number>();
  for (const s of slices) {
    const key = `${s.spec?.driver}/${s.spec?.pool?.name}`;
    newest.set(key, Math.max(newest.get(key) ?? 0, s.spec?.pool?.generation ?? 0));
  }
  const out: CounterSetRow[] = [];
  for (const s of slices) {
    const spec = s.spec || {};
    const pool = spec.pool?.name || '';
    if ((spec.pool?.generation ?? 0) < (newest.get(`${spec.driver}/${pool}`) ?? 0)) continue;
    for (const set of spec.sharedCounters || []) {
      out.push({
        id: `${spec.driver}/${pool}/${set.name}`,
        driver: spec.driver,
        pool,
        name: set.name,
        node: spec.nodeName || '',
        counters: set.counters || {},
      });
    }
  }
  return out;
}

const SUFFIX: Record<string, number> = {
  '': 1, n: 1e-9, u: 1e-6, m: 1e-3, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18,
  Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60,
};

// A Kubernetes quantity ("80Gi", "40192Mi", "7", "500m", "1e3") as a number; NaN if malformed.
export function parseQuantity(q: string): number {
  const m = /^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|([numkKMGTPE]i?|)?)$/.exec(String(q).trim());
  if (!m) return NaN;
  if (m[2]) return Number(m[1] + m[2]);
  const unit = m[3] || '';
  if (!(unit in SUFFIX)) return NaN;
  return Number(m[1]) * SUFFIX[unit];
}

// `value` in the unit of `like` ("80Gi" -> Gi): 50Gi, 39.25Gi, 4.
export function formatQuantityLike(value: number, like: string): string {
  const m = /([numkKMGTPE]i?)$/.exec(String(like).trim());
  const unit = m && m[1] in SUFFIX ? m[1] : '';
  const n = value / SUFFIX[unit];
  const text = Number.isInteger(n) ? String(n) : String(Math.round(n * 100) / 100);
  return text + unit;
}

// --- Device taints: the device's own and those of DeviceTaintRules ---------------------------

export interface RuleTaint {
  rule: string; // the DeviceTaintRule's name
  taint: Taint;
  // The rule selects exactly this device (driver, pool and device all set).
  exact: boolean;
  // Set by the server's device-health reports (the agent sets it again while unhealthy).
  health: boolean;
}

// driver/pool/device -> the taints DeviceTaintRules add to it (as the allocator applies them:
// every selector field that is set must match; a rule without a selector matches nothing).
export function ruleTaintsOf(rules: K8sObject[], devices: DeviceRow[]): Map<string, RuleTaint[]> {
  const out = new Map<string, RuleTaint[]>();
  const byId = new Map(devices.map((d) => [d.id, d]));
  for (const r of rules) {
    const sel = r.spec?.deviceSelector;
    const taint = r.spec?.taint;
    if (!sel || !taint) continue;
    const exact = !!(sel.driver && sel.pool && sel.device);
    const health = !!r.metadata.labels?.['quartermaster.io/unhealthy-node'];
    const add = (d: DeviceRow) => {
      const list = out.get(d.id) || [];
      list.push({ rule: r.metadata.name, taint, exact, health });
      out.set(d.id, list);
    };
    if (exact) {
      const id = `${sel.driver}/${sel.pool}/${sel.device}`;
      const d = byId.get(id);
      if (d) add(d);
      continue;
    }
    for (const d of devices) {
      if (sel.driver && sel.driver !== d.driver) continue;
      if (sel.pool && sel.pool !== d.pool) continue;
      if (sel.device && sel.device !== d.name) continue;
      add(d);
    }
  }
  return out;
}

// A DNS subdomain for a rule that taints one device with `key` and `effect`.
export function taintRuleName(d: DeviceRow, key: string, effect: string): string {
  const parts = [d.driver, d.pool, d.name, key, effect]
    .join('.')
    .toLowerCase()
    .split('.')
    .map((p) => p.replace(/[^a-z0-9-]+/g, '-').replace(/^-+|-+$/g, ''))
    .filter(Boolean);
  return parts.join('.').slice(0, 253).replace(/[.-]+$/, '');
}
