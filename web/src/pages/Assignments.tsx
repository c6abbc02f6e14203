import { memo, useEffect, useMemo, useRef, useState } from 'react';
import {
  DeviceHistoryClaim,
  DeviceHistoryStatus,
  Json,
  K8sObject,
  errorText,
  paths,
  reviewDeviceHistory,
} from '../api';
import { Badge, Link, LoadState, age } from '../components';
import { useAllHolders } from '../holders';
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
              <span className="muted">({x.request})</span>
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

export function AssignmentsPage() {
  const query = new URLSearchParams(window.location.search);
  const initial = query.get('node') || query.get('device') || '';
  const [filter, setFilter] = useState(initial);
  const [view, setView] = useState<'claim' | 'device'>(
    query.get('view') === 'device' || query.get('device') ? 'device' : 'claim',
  );
  // Claims are read by the By claim view only.
  const claims = usePagedCollectionWhen(paths.claims, view === 'claim');
  const [heldOnly, setHeldOnly] = useState(true);
  // Every claim is read while the By claim view is filtered (the filter must see every claim). By
  // device reads no claim: who holds what comes from DeviceHolderReviews (every held device, asked
  // again when the ClusterSummary says a claim changed).
  const needAll = view === 'claim' && !!filter.trim();
  const held = useAllHolders(view === 'device');
  const { wantAll, loadMore } = claims;
  useEffect(() => (needAll ? wantAll() : undefined), [needAll, wantAll]);
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
  const rows = useMemo(() => {
    const out = claims.items.filter((c) => c.status?.allocation).map((c) => claimRowOf(c, devices));
    const f = filter.trim().toLowerCase();
    if (!f) return out;
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
  }, [claims.items, devices, filter]);
  // Too few allocated claims among those read to fill the screen: the next page.
  useEffect(() => {
    if (view === 'claim' && claims.loaded && !claims.complete && !claims.loading && rows.length < CLAIM_ROWS_WANTED) {
      loadMore();
    }
  }, [view, claims.loaded, claims.complete, claims.loading, rows.length, loadMore]);

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
          placeholder="claim, node, device or pod"
          value={filter}
          onChange={(e) => setFilter(e.target.value)}
        />
        {view === 'claim' && (
          <span className="muted" data-testid="assignment-count">
            {rows.length} allocated {rows.length === 1 ? 'claim' : 'claims'}
            {!claims.complete && ` in the first ${claims.items.length} claims (more as you scroll)`}
          </span>
        )}
      </div>
      <LoadState
        loaded={view === 'device' ? held.loaded : claims.loaded}
        error={(view === 'device' ? held.error : claims.error) || allSlices.error}
      />
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
      {view === 'claim' && claims.complete && rows.length === 0 && <p>No claim is allocated.</p>}
      {view === 'claim' && claims.loaded && !claims.complete && (
        <p className="loading" role="status" data-testid="claims-loading">
          Reading claims: {claims.items.length} so far…
        </p>
      )}
      {view === 'claim' && rows.length > 0 && (
        <VirtualTable
          aria-label="Allocated claims"
          items={rows}
          itemKey={(r) => r.key}
          columns={4}
          estimate={60}
          head={BY_CLAIM_HEAD}
          rowCount={claims.complete ? rows.length + 1 : -1}
          onEndReached={loadMore}
          renderItem={(r, i) => <ClaimRow r={r} index={i} />}
        />
      )}
    </section>
  );
}
