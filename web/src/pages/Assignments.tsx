import { memo, useEffect, useMemo, useRef, useState } from 'react';
import {
  DeviceHistoryClaim,
  DeviceHistoryStatus,
  Json,
  K8sObject,
  errorText,
  paths,
  request,
  reviewDeviceHistory,
  withQuery,
} from '../api';
import { Badge, Link, LoadState, age } from '../components';
import { useAllHolders, useClaimsHolding } from '../holders';
import { DeviceRow, Holder, allocationNode, devicesOf } from '../model';
import { useNodeSliceChanges, useNodeSlices, usePagedCollectionWhen } from '../paged';
import { useCollectionWhen } from '../store';
import { VirtualTable } from '../VirtualTable';
import { useDeviceSummary } from './Overview';

interface LogEntry {
  time: Date;
  device: string; // driver/pool/device
  claim: string; // namespace/name
  change: 'allocated' | 'released';
}

const LOG_MAX = 1000;

// Allocations and releases seen live (the holders, asked for again on each claim change) while the
// page is open; the recorded history of a device comes from DeviceAllocationHistoryReview
// (DeviceHistory below).
function useAllocationLog(allocations: Map<string, Holder[]>, ready: boolean): LogEntry[] {
  const previous = useRef<Map<string, Set<string>> | null>(null);
  const [log, setLog] = useState<LogEntry[]>([]);
  useEffect(() => {
    if (!ready) return;
    const next = new Map<string, Set<string>>();
    for (const [id, holders] of allocations) next.set(id, new Set(holders.map((h) => h.claim)));
    const before = previous.current;
    previous.current = next;
    if (!before) return;
    const time = new Date();
    const added: LogEntry[] = [];
    for (const [device, claims] of next) {
      for (const claim of claims) {
        if (!before.get(device)?.has(claim)) added.push({ time, device, claim, change: 'allocated' });
      }
    }
    for (const [device, claims] of before) {
      for (const claim of claims) {
        if (!next.get(device)?.has(claim)) added.push({ time, device, claim, change: 'released' });
      }
    }
    if (added.length) setLog((l) => [...added, ...l].slice(0, LOG_MAX));
  }, [allocations, ready]);
  return log;
}

function clock(t: Date): string {
  return t.toLocaleTimeString([], { hour12: false });
}

function claimText(c: DeviceHistoryClaim): string {
  return c.name ? `${c.namespace}/${c.name}` : `${c.namespace || '?'}/(deleted, uid ${c.uid})`;
}

const HISTORY_RANGES: [string, string][] = [
  ['24h', 'last day'],
  ['7d', 'last week'],
  ['30d', 'last 30 days'],
];

// The device's recorded allocation history, asked for when opened (one review per device).
function DeviceHistory({ device }: { device: DeviceRow }) {
  const [open, setOpen] = useState(false);
  const [range, setRange] = useState('7d');
  const [state, setState] = useState<{ status?: DeviceHistoryStatus; error?: string }>({});
  useEffect(() => {
    if (!open) return;
    const abort = new AbortController();
    setState({});
    reviewDeviceHistory(
      { driver: device.driver, pool: device.pool, device: device.name, range, limit: 200 },
      abort.signal,
    )
      .then((status) => setState({ status }))
      .catch((e) => {
        if (!abort.signal.aborted) setState({ error: errorText(e) });
      });
    return () => abort.abort();
  }, [open, range, device.driver, device.pool, device.name]);
  if (!open) {
    return (
      <button type="button" onClick={() => setOpen(true)} aria-label={`History of ${device.id}`}>
        History
      </button>
    );
  }
  const { status, error } = state;
  return (
    <div data-testid="recorded-history">
      <label>
        Recorded history{' '}
        <select value={range} onChange={(e) => setRange(e.target.value)}>
          {HISTORY_RANGES.map(([v, text]) => (
            <option key={v} value={v}>
              {text}
            </option>
          ))}
        </select>
      </label>{' '}
      <button type="button" onClick={() => setOpen(false)}>
        Hide
      </button>
      {error ? (
        <p role="alert" className="error">
          {error}
        </p>
      ) : !status ? (
        <p className="muted">Loading…</p>
      ) : status.events.length === 0 ? (
        <p className="muted">No allocation or release in this range.</p>
      ) : (
        <ul className="plain">
          {status.events.map((e, i) => (
            <li key={i} data-event={e.type}>
              <time dateTime={e.time}>{new Date(e.time).toLocaleString([], { hour12: false })}</time>{' '}
              <Badge kind={e.type === 'Allocated' ? 'info' : 'ok'}>
                {e.type === 'Allocated' ? 'allocated' : 'released'}
              </Badge>{' '}
              {e.type === 'Allocated' ? 'to' : 'by'} claim {claimText(e.claim)}
              {e.shareID && <span className="muted"> (share {e.shareID})</span>}
              {e.adminAccess && <span className="muted"> (admin access)</span>}
            </li>
          ))}
          {status.truncated && <li className="muted">… older changes not shown (newest 200)</li>}
        </ul>
      )}
    </div>
  );
}

// One holder of a device (with its pods and claim time, from the DeviceHolderReview).
function HolderItem({ h }: { h: Holder }) {
  const pods = h.pods || [];
  return (
    <li data-holder={h.claim}>
      <Badge kind="info">{h.shareId ? 'share' : 'allocated'}</Badge>
      claim {h.claim} <span className="muted">(request {h.request})</span>
      {h.consumedCapacity &&
        Object.entries(h.consumedCapacity).map(([k, v]) => (
          <span key={k} className="muted">
            {' '}
            {k}: {String(v)}
          </span>
        ))}
      <div>
        {pods.length ? `pods ${pods.join(', ')}` : 'no pod uses it'}
        {h.claimCreated && <span className="muted">; claim created {age(h.claimCreated)} ago</span>}
      </div>
    </li>
  );
}

// A device known from the claims only (its slice not loaded): id, node, no attributes.
function stubDevice(id: string, node: string): DeviceRow {
  const [driver, pool, ...rest] = id.split('/');
  return {
    id,
    driver,
    pool,
    name: rest.join('/'),
    node,
    slice: '',
    attributes: {},
    capacity: {},
    taints: [],
    model: '',
    consumes: [],
  };
}

// The model of a device known from the claims only: from its node's ResourceSlices
// (fieldSelector=spec.nodeName), asked for when its row is drawn.
function LazyModel({ d }: { d: DeviceRow }) {
  const slices = useNodeSlices(paths.slices, d.node);
  const found = useMemo(() => devicesOf(slices.items).find((x) => x.id === d.id), [slices.items, d.id]);
  if (!slices.loaded) return <>…</>;
  return <>{found?.model ?? ''}</>;
}

const NO_HOLDERS: Holder[] = [];
const NO_ENTRIES: LogEntry[] = [];

// One device's row, memoized: its props (the device, its holders, its log) keep their identity
// while they do not change.
const DeviceHoldersRow = memo(function DeviceHoldersRow({
  d,
  index,
  holders,
  entries,
}: {
  d: DeviceRow;
  index: number;
  holders: Holder[];
  entries: LogEntry[];
}) {
  return (
    <tr data-device={d.id} aria-rowindex={index + 2}>
      <th scope="row">
        <code>{d.id}</code>
        <div className="muted">{d.slice ? d.model : <LazyModel d={d} />}</div>
      </th>
      <td>
        {d.node ? (
          <Link to={`/inventory/${encodeURIComponent(d.node)}`}>{d.node}</Link>
        ) : (
          <span className="muted">any</span>
        )}
      </td>
      <td data-testid="holders">
        {holders.length === 0 ? (
          <Badge kind="ok">free</Badge>
        ) : (
          <ul className="plain">
            {holders.map((h) => (
              <HolderItem key={h.claim + (h.shareId || '')} h={h} />
            ))}
          </ul>
        )}
      </td>
      <td>
        {entries.length > 0 && (
          <ul className="plain" data-testid="history" aria-label="Seen on this page">
            {entries.map((e, i) => (
              <li key={i}>
                <time dateTime={e.time.toISOString()}>{clock(e.time)}</time>{' '}
                {e.change === 'allocated' ? 'allocated to' : 'released by'} {e.claim}
              </li>
            ))}
          </ul>
        )}
        <DeviceHistory device={d} />
      </td>
    </tr>
  );
});

const BY_DEVICE_HEAD = (
  <thead>
    <tr>
      <th scope="col">Device</th>
      <th scope="col">Node</th>
      <th scope="col">Held by now</th>
      <th scope="col">History</th>
    </tr>
  </thead>
);

// Every device with who holds it now (claims, their requests, shares and pods) and the changes
// seen since the page opened.
function ByDevice({
  devices,
  total,
  allocations,
  log,
  filter,
  heldOnly,
  setHeldOnly,
}: {
  devices: DeviceRow[];
  total: number | undefined; // every device of the inventory
  allocations: Map<string, Holder[]>;
  log: LogEntry[];
  filter: string;
  heldOnly: boolean;
  setHeldOnly: (heldOnly: boolean) => void;
}) {
  const logByDevice = useMemo(() => {
    const m = new Map<string, LogEntry[]>();
    for (const e of log) m.set(e.device, [...(m.get(e.device) || []), e]);
    return m;
  }, [log]);

  const rows = useMemo(() => {
    const f = filter.trim().toLowerCase();
    const out = devices.filter((d) => {
      const holders = allocations.get(d.id) || [];
      if (heldOnly && !holders.length && !logByDevice.has(d.id)) return false;
      if (!f) return true;
      return [
        d.id,
        d.node,
        d.model,
        ...holders.map((h) => h.claim),
        ...holders.flatMap((h) => h.pods || []),
      ]
        .join(' ')
        .toLowerCase()
        .includes(f);
    });
    return out.sort(
      (a, b) =>
        Number(allocations.has(b.id)) - Number(allocations.has(a.id)) ||
        (a.id < b.id ? -1 : a.id > b.id ? 1 : 0),
    );
  }, [devices, allocations, filter, heldOnly, logByDevice]);

  const held = allocations.size;
  return (
    <>
      <div className="toolbar">
        <label>
          <input
            type="checkbox"
            checked={heldOnly}
            onChange={(e) => setHeldOnly(e.target.checked)}
          />{' '}
          Only devices held now or changed
        </label>
        <span className="muted" data-testid="device-count">
          {held} of {total ?? '…'} devices held; {rows.length} shown
        </span>
      </div>
      {rows.length === 0 ? (
        <p>No device is held.</p>
      ) : (
        <VirtualTable
          data-testid="devices-by-device"
          aria-label="Devices and their holders"
          items={rows}
          itemKey={(d) => d.id}
          columns={4}
          estimate={70}
          head={BY_DEVICE_HEAD}
          renderItem={(d, i) => (
            <DeviceHoldersRow
              d={d}
              index={i}
              holders={allocations.get(d.id) || NO_HOLDERS}
              entries={logByDevice.get(d.id) || NO_ENTRIES}
            />
          )}
        />
      )}
    </>
  );
}

interface ClaimRowData {
  key: string;
  node: string;
  results: Json[];
  consumers: Json[];
}

const claimRows = new WeakMap<K8sObject, ClaimRowData>();

// A claim's row data, once per claim object (and node): unchanged claims keep it.
function claimRowOf(c: K8sObject, devices: Map<string, DeviceRow>): ClaimRowData {
  const node = allocationNode(c, devices);
  const cached = claimRows.get(c);
  if (cached && cached.node === node) return cached;
  const row = {
    key: `${c.metadata.namespace}/${c.metadata.name}`,
    node,
    results: c.status.allocation.devices?.results || [],
    consumers: (c.status.reservedFor || []).filter((r: Json) => !r.resource || r.resource === 'pods'),
  };
  claimRows.set(c, row);
  return row;
}

const ClaimRow = memo(function ClaimRow({ r, index }: { r: ClaimRowData; index: number }) {
  return (
    <tr data-claim={r.key} aria-rowindex={index + 2}>
      <th scope="row">{r.key}</th>
      <td>
        <ul className="plain">
          {r.results.map((x, i) => (
            <li key={i}>
              <code>
                {x.driver}/{x.pool}/{x.device}
              </code>{' '}
              <span className="muted">({x.request})</span>{' '}
              {x.shareID && <Badge kind="info">share {String(x.shareID).slice(0, 8)}</Badge>}
              {x.consumedCapacity &&
                Object.entries(x.consumedCapacity).map(([k, v]) => (
                  <span key={k} className="muted">
                    {' '}
                    {k}: {String(v)}
                  </span>
                ))}
              {x.adminAccess && <Badge kind="warn">admin access</Badge>}
            </li>
          ))}
        </ul>
      </td>
      <td>
        {r.node ? (
          <Link to={`/inventory/${encodeURIComponent(r.node)}`}>{r.node}</Link>
        ) : (
          <span className="muted">any</span>
        )}
      </td>
      <td>
        {r.consumers.length === 0 ? (
          <span className="muted">none</span>
        ) : (
          <>
            {r.consumers.length > 1 && <Badge kind="info">shared by {r.consumers.length}</Badge>}
            <ul className="plain">
              {r.consumers.map((p) => (
                <li key={p.uid || p.name}>pod {p.name}</li>
              ))}
            </ul>
          </>
        )}
      </td>
    </tr>
  );
});

const BY_CLAIM_HEAD = (
  <thead>
    <tr>
      <th scope="col">Claim</th>
      <th scope="col">Devices</th>
      <th scope="col">Node</th>
      <th scope="col">Consumers</th>
    </tr>
  </thead>
);

// By claim, claims are read page by page (limit/continue) until this many allocated ones fill
// the screen; more as the table is scrolled to its end.
const CLAIM_ROWS_WANTED = 40;
// Free text reads at most this many more claims on its own before it asks (a button) to read on.
const FREE_TEXT_BUDGET = 2000;

// What a By claim filter reads. No form lists every ResourceClaim of the cluster at once:
// - '' (none): every claim, page by page (limit/continue) until 40 allocated ones fill the
//   screen, more as the table is scrolled to its end; one watch of the kind.
// - namespace ("NS/", "NS/text", or a bare word naming a Namespace): that namespace's claims
//   only (/apis/resource.k8s.io/v1/namespaces/NS/resourceclaims, limit/continue as above, and a
//   watch of that path); "text" narrows to the claims whose name contains it.
// - node (a bare word naming a Node): a DeviceHolderReview for the pools of the node's
//   ResourceSlices (fieldSelector=spec.nodeName) names the claims holding its devices; each is
//   read by name; asked again when the ClusterSummary says a claim changed.
// - device ("driver/pool/device", or "driver/pool" for the whole pool; a driver has a dot, a
//   namespace has none): the same review for that pool, the claims holding that device (every
//   device of the pool).
// - text (anything else): every claim, page by page as for none, filtered here on claim, node,
//   device and pod names; pages are read until 40 matches fill the screen or 2,000 more claims
//   were read (then the user asks for the next 2,000), more as the table is scrolled.
// A bare word is looked up as a Node and a Namespace by name (a list with
// fieldSelector=metadata.name: no 404 when there is none) before anything is read for it.
type ClaimFilter =
  | { kind: 'none' }
  | { kind: 'namespace'; namespace: string; text: string }
  | { kind: 'node'; node: string }
  | { kind: 'device'; driver: string; pool: string; device: string }
  | { kind: 'text'; text: string };

type ParsedFilter = ClaimFilter | { kind: 'word'; word: string };

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

function parseClaimFilter(f: string): ParsedFilter {
  if (!f) return { kind: 'none' };
  if (!f.includes('/')) return /\s/.test(f) ? { kind: 'text', text: f } : { kind: 'word', word: f };
  const parts = f.split('/');
  if (parts.length === 2 && DNS_LABEL.test(parts[0])) {
    return { kind: 'namespace', namespace: parts[0], text: parts[1] };
  }
  if (parts[0].includes('.') && parts[1] && !/\s/.test(f)) {
    if (parts.length === 2) return { kind: 'device', driver: parts[0], pool: parts[1], device: '' };
    return {
      kind: 'device',
      driver: parts[0],
      pool: parts.slice(1, -1).join('/'),
      device: parts[parts.length - 1],
    };
  }
  return { kind: 'text', text: f };
}

async function named(path: string, name: string, signal: AbortSignal): Promise<boolean> {
  const list = await request(withQuery(path, { fieldSelector: `metadata.name=${name}`, limit: '1' }), {
    signal,
  });
  return (list?.items || []).length > 0;
}

// The filter's form; a bare word's after it was looked up (250 ms after the last keystroke).
// While a word is looked up, `filter` is the form before it (its reads go on) and `pending` is set.
function useClaimFilter(text: string): { filter: ClaimFilter; pending: boolean } {
  const parsed = useMemo(() => parseClaimFilter(text.trim()), [text]);
  const [resolved, setResolved] = useState<{ word: string; filter: ClaimFilter } | null>(null);
  const last = useRef<ClaimFilter>({ kind: 'none' });
  useEffect(() => {
    if (parsed.kind !== 'word') return;
    const word = parsed.word;
    const abort = new AbortController();
    const timer = window.setTimeout(() => {
      Promise.all([
        named(paths.nodes, word, abort.signal).catch(() => false),
        named(paths.namespaces, word, abort.signal).catch(() => false),
      ]).then(([node, namespace]) => {
        if (abort.signal.aborted) return;
        setResolved({
          word,
          filter: node
            ? { kind: 'node', node: word }
            : namespace
              ? { kind: 'namespace', namespace: word, text: '' }
              : { kind: 'text', text: word },
        });
      });
    }, 250);
    return () => {
      abort.abort();
      window.clearTimeout(timer);
    };
  }, [parsed]);
  if (parsed.kind !== 'word') {
    last.current = parsed;
    return { filter: parsed, pending: false };
  }
  if (resolved?.word === parsed.word) {
    last.current = resolved.filter;
    return { filter: resolved.filter, pending: false };
  }
  return { filter: last.current, pending: true };
}

function describe(f: ClaimFilter): string {
  switch (f.kind) {
    case 'none':
      return '';
    case 'namespace':
      return ` in namespace ${f.namespace}${f.text ? ` whose name contains “${f.text}”` : ''}`;
    case 'node':
      return ` holding devices of node ${f.node}`;
    case 'device':
      return f.device ? ` holding ${f.driver}/${f.pool}/${f.device}` : ` holding devices of pool ${f.driver}/${f.pool}`;
    case 'text':
      return ` matching “${f.text}”`;
  }
}

const NO_POOLS: string[] = [];

// The By claim view: the allocated claims the filter selects, live (see ClaimFilter for what each
// form reads).
function ByClaim({ text, devices }: { text: string; devices: Map<string, DeviceRow> }) {
  const { filter, pending } = useClaimFilter(text);
  const paging = filter.kind === 'none' || filter.kind === 'text' || filter.kind === 'namespace';
  const claimsPath = filter.kind === 'namespace' ? paths.namespacedClaims(filter.namespace) : paths.claims;
  // Nothing is read while a word is looked up (a collection left then is kept for 1.5 s: one the
  // word turns out to need again goes on without a new list).
  const claims = usePagedCollectionWhen(claimsPath, paging && !pending);
  // node and device: the pools the review asks for, and which of their devices count.
  const nodeSlices = useNodeSlices(paths.slices, filter.kind === 'node' ? filter.node : '');
  const target = useMemo((): { pools: string[] | null; wanted: (id: string) => boolean; key: string } => {
    if (filter.kind === 'device') {
      const pool = `${filter.driver}/${filter.pool}`;
      const id = `${pool}/${filter.device}`;
      const wanted = filter.device ? (d: string) => d === id : (d: string) => d.startsWith(`${pool}/`);
      return { pools: [pool], wanted, key: `device ${id}` };
    }
    if (filter.kind === 'node') {
      if (!nodeSlices.loaded) return { pools: null, wanted: () => false, key: '' };
      const ids = new Set<string>();
      const pools = new Set<string>();
      for (const d of devicesOf(nodeSlices.items)) {
        ids.add(d.id);
        pools.add(`${d.driver}/${d.pool}`);
      }
      return { pools: [...pools].sort(), wanted: (id) => ids.has(id), key: `node ${filter.node} ${[...ids].join(' ')}` };
    }
    return { pools: NO_POOLS, wanted: () => false, key: '' };
  }, [filter, nodeSlices.loaded, nodeSlices.items]);
  const holding = useClaimsHolding(target.pools, target.wanted, target.key, !paging && !pending);

  const source = paging ? claims.items : holding.claims;
  const rows = useMemo(() => {
    const out = source.filter((c) => c.status?.allocation).map((c) => claimRowOf(c, devices));
    if (filter.kind === 'namespace' && filter.text) {
      const t = filter.text.toLowerCase();
      return out.filter((r) => r.key.slice(filter.namespace.length + 1).toLowerCase().includes(t));
    }
    if (filter.kind !== 'text') return out;
    const f = filter.text.toLowerCase();
    return out.filter((r) =>
      [
        r.key,
        r.node,
        ...r.results.map((x) => `${x.driver}/${x.pool}/${x.device}`),
        ...r.consumers.map((p) => p.name),
      ]
        .join(' ')
        .toLowerCase()
        .includes(f),
    );
  }, [source, devices, filter]);

  // Free text reads claims up to `upTo` on its own, by the screen filling or by scrolling (the
  // next 2,000 when asked for with the button); a new text starts from the claims read so far.
  const { loadMore } = claims;
  const textKey = filter.kind === 'text' ? filter.text : null;
  const [budget, setBudget] = useState<{ text: string | null; upTo: number }>({ text: null, upTo: Infinity });
  let upTo = budget.upTo;
  if (budget.text !== textKey) {
    upTo = textKey === null ? Infinity : claims.items.length + FREE_TEXT_BUDGET;
    setBudget({ text: textKey, upTo });
  }
  const budgetLeft = claims.items.length < upTo;
  // Too few rows among the claims read to fill the screen: the next page.
  useEffect(() => {
    if (paging && claims.loaded && !claims.complete && !claims.loading && budgetLeft && rows.length < CLAIM_ROWS_WANTED) {
      loadMore();
    }
  }, [paging, claims.loaded, claims.complete, claims.loading, budgetLeft, rows.length, loadMore]);

  const loaded = paging ? claims.loaded : holding.loaded;
  const complete = paging ? claims.complete : holding.loaded;
  const error = paging ? claims.error : holding.error;
  const what = describe(filter);
  return (
    <>
      <span className="muted" data-testid="assignment-count" aria-live="polite">
        {pending
          ? `Looking up “${text.trim()}”…`
          : `${rows.length} allocated ${rows.length === 1 ? 'claim' : 'claims'}${what}` +
            (paging && !claims.complete
              ? ` in the first ${claims.items.length} claims${filter.kind === 'namespace' ? ' of the namespace' : ''}` +
                (budgetLeft ? ' (more as you scroll)' : '')
              : '')}
      </span>
      {paging && claims.loaded && !claims.complete && !budgetLeft && (
        <p role="status" data-testid="claims-search-further">
          Searched the first {claims.items.length} claims.{' '}
          <button type="button" onClick={() => setBudget({ text: textKey, upTo: claims.items.length + FREE_TEXT_BUDGET })}>
            Search the next {FREE_TEXT_BUDGET} claims
          </button>
        </p>
      )}
      <LoadState loaded={loaded} error={error} />
      {!pending && complete && rows.length === 0 && (
        <p>{what ? `No allocated claim${what}.` : 'No claim is allocated.'}</p>
      )}
      {paging && claims.loaded && !claims.complete && budgetLeft && (
        <p className="loading" role="status" data-testid="claims-loading">
          Reading claims: {claims.items.length} so far…
        </p>
      )}
      {!pending && rows.length > 0 && (
        <VirtualTable
          aria-label="Allocated claims"
          items={rows}
          itemKey={(r) => r.key}
          columns={4}
          estimate={60}
          head={BY_CLAIM_HEAD}
          rowCount={complete ? rows.length + 1 : -1}
          onEndReached={paging && budgetLeft ? loadMore : undefined}
          renderItem={(r, i) => <ClaimRow r={r} index={i} />}
        />
      )}
    </>
  );
}

export function AssignmentsPage() {
  const query = new URLSearchParams(window.location.search);
  const initial = query.get('node') || query.get('device') || '';
  const [filter, setFilter] = useState(initial);
  const [view, setView] = useState<'claim' | 'device'>(
    query.get('view') === 'device' || query.get('device') ? 'device' : 'claim',
  );
  const [heldOnly, setHeldOnly] = useState(true);
  // Claims are read by the By claim view only (ByClaim: what each filter form reads). By device
  // reads no claim: who holds what comes from DeviceHolderReviews (every held device, asked again
  // when the ClusterSummary says a claim changed).
  const held = useAllHolders(view === 'device');
  // No ResourceSlice is listed whole unless every device is asked for (By device, "Only devices
  // held now or changed" unticked): a claim names its node and devices; the slices without a node
  // (devices bound per device, or to no node) say where those are; a drawn device row asks for
  // its node's slices for the model.
  const every = view === 'device' && !heldOnly;
  const allSlices = useCollectionWhen(paths.slices, every);
  const unbound = useNodeSlices(paths.slices, '');
  const slicesChanged = useNodeSliceChanges(paths.slices);
  const summary = useDeviceSummary(String(slicesChanged));
  const known = useMemo(
    () => devicesOf(allSlices.loaded ? allSlices.items : unbound.items),
    [allSlices.loaded, allSlices.items, unbound.items],
  );
  const devices = useMemo(() => new Map(known.map((d) => [d.id, d])), [known]);
  const allocations = held.allocations;
  // (from the first answer on: the devices held then are no change)
  const log = useAllocationLog(allocations, held.loaded);
  // The node of each device a claim held while the page is open (a released one keeps it).
  const nodeOf = useRef(new Map<string, string>());
  const deviceList = useMemo(() => {
    if (allSlices.complete) return known;
    for (const [id, holders] of allocations) {
      nodeOf.current.set(id, devices.get(id)?.node || holders[0].node || '');
    }
    const ids = new Set([...allocations.keys(), ...log.map((e) => e.device)]);
    return Array.from(ids, (id) => devices.get(id) || stubDevice(id, nodeOf.current.get(id) || ''));
  }, [allSlices.complete, known, allocations, devices, log]);
  const summaryTotal = summary.groups?.reduce((n, g) => n + (g.devices || 0), 0);
  const total = allSlices.complete ? known.length : summaryTotal;
  return (
    <section aria-labelledby="assignments-title">
      <h1 id="assignments-title">Assignments</h1>
      <p>
        Every allocated ResourceClaim, live: its devices, node and the pods using it; or per device,
        who holds it now.
      </p>
      <div className="toolbar">
        <div role="group" aria-label="View" className="segmented">
          <button
            type="button"
            className={view === 'claim' ? '' : 'secondary'}
            aria-pressed={view === 'claim'}
            onClick={() => setView('claim')}
          >
            By claim
          </button>
          <button
            type="button"
            className={view === 'device' ? '' : 'secondary'}
            aria-pressed={view === 'device'}
            onClick={() => setView('device')}
          >
            By device
          </button>
        </div>
        <label htmlFor="assignments-filter">Filter</label>
        <input
          id="assignments-filter"
          type="search"
          placeholder={view === 'claim' ? 'namespace/, node, device or text' : 'claim, node, device or pod'}
          value={filter}
          onChange={(e) => setFilter(e.target.value)}
        />
      </div>
      {view === 'device' ? (
        <LoadState loaded={held.loaded} error={held.error || allSlices.error} />
      ) : (
        <ByClaim text={filter} devices={devices} />
      )}
      {every && !allSlices.complete && (
        <p className="loading" role="status">
          Loading every device: {known.length} so far…
        </p>
      )}
      {view === 'device' && held.loaded && (
        <ByDevice
          devices={deviceList}
          total={total}
          allocations={allocations}
          log={log}
          filter={filter}
          heldOnly={heldOnly}
          setHeldOnly={setHeldOnly}
        />
      )}
    </section>
  );
}
