import { Fragment, Suspense, lazy, useEffect, useMemo, useRef, useState } from 'react';
import {
  DeviceMatchStatus,
  K8sObject,
  attributeText,
  errorText,
  paths,
  request,
  reviewMatches,
} from '../api';
import type { CelProblem } from '../CelEditor';
import {
  Badge,
  GuardedButton,
  Labels,
  Link,
  LoadState,
  ReadOnlyNotice,
  ShowMore,
  useRowLimit,
} from '../components';
import { DeviceRow, Holder, allocationsOf, devicesOf, nodeReady } from '../model';
import { useCan, useCollection } from '../store';

const CelEditor = lazy(() => import('../CelEditor').then((m) => ({ default: m.CelEditor })));

const CEL_DEBOUNCE_MS = 300;
// The most devices a DeviceMatchReview lists (the server's limit); more are counted only.
const CEL_LIMIT = 5000;

function Taints({ taints }: { taints?: { key: string; value?: string; effect: string }[] }) {
  if (!taints?.length) return <span className="muted">none</span>;
  return (
    <ul className="chips">
      {taints.map((t, i) => (
        <li key={i}>
          <code>
            {t.key}
            {t.value ? `=${t.value}` : ''}:{t.effect}
          </code>
        </li>
      ))}
    </ul>
  );
}

function NodeDevices({
  devices,
  allocations,
  filtered,
}: {
  devices: DeviceRow[];
  allocations: Map<string, Holder[]>;
  filtered: boolean;
}) {
  const bySlice = new Map<string, DeviceRow[]>();
  for (const d of devices) bySlice.set(d.slice, [...(bySlice.get(d.slice) || []), d]);
  if (!devices.length) {
    return <p>{filtered ? 'No device of this node matches the filter.' : 'This node publishes no devices.'}</p>;
  }
  return (
    <>
      {Array.from(bySlice.entries()).map(([slice, list]) => (
        <div key={slice} className="slice">
          <h3>
            ResourceSlice <code>{slice}</code> — driver <code>{list[0].driver}</code>, pool{' '}
            <code>{list[0].pool}</code>
          </h3>
          <table>
            <thead>
              <tr>
                <th scope="col">Device</th>
                <th scope="col">Attributes</th>
                <th scope="col">Capacity</th>
                <th scope="col">Taints</th>
                <th scope="col">Held by</th>
              </tr>
            </thead>
            <tbody>
              {list.map((d) => {
                const holders = allocations.get(d.id) || [];
                return (
                  <tr key={d.id} data-device={d.id}>
                    <th scope="row">{d.name}</th>
                    <td>
                      <ul className="attrs">
                        {Object.entries(d.attributes).map(([k, v]) => (
                          <li key={k}>
                            <span className="k">{k}</span> <span className="v">{attributeText(v)}</span>
                          </li>
                        ))}
                      </ul>
                    </td>
                    <td>
                      <ul className="attrs">
                        {Object.entries(d.capacity).map(([k, v]) => (
                          <li key={k}>
                            <span className="k">{k}</span> <span className="v">{v.value}</span>
                          </li>
                        ))}
                      </ul>
                    </td>
                    <td>
                      <Taints taints={d.taints} />
                    </td>
                    <td>
                      {holders.length === 0 ? (
                        <Badge kind="ok">free</Badge>
                      ) : (
                        holders.map((h) => (
                          <div key={h.claim + (h.shareId || '')}>
                            <Badge kind="info">{h.shareId ? 'share' : 'allocated'}</Badge> {h.claim}
                          </div>
                        ))
                      )}
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      ))}
    </>
  );
}

function positioned(p: CelProblem): string {
  return p.line ? `Line ${p.line}, column ${p.column}: ${p.message}` : p.message;
}

interface CelFilterState {
  expression: string; // the expression the status answers
  status: DeviceMatchStatus | null;
  error: string;
}

// The devices a CEL expression matches (DeviceMatchReview, as the class editor's preview),
// asked again, debounced, when the expression or the inventory changes.
function useCelFilter(expression: string, inventoryVersion: number): CelFilterState {
  const [state, setState] = useState<CelFilterState>({ expression: '', status: null, error: '' });
  const seq = useRef(0);
  useEffect(() => {
    const n = ++seq.current;
    if (!expression.trim()) {
      setState({ expression: '', status: null, error: '' });
      return;
    }
    // Stale answers are dropped rather than aborted (a cancelled request is no error).
    const timer = window.setTimeout(async () => {
      try {
        const status = await reviewMatches({ selectors: [expression], limit: CEL_LIMIT });
        if (n === seq.current) setState({ expression, status, error: '' });
      } catch (e) {
        if (n === seq.current) setState({ expression, status: null, error: errorText(e) });
      }
    }, CEL_DEBOUNCE_MS);
    return () => window.clearTimeout(timer);
  }, [expression, inventoryVersion]);
  return state;
}

function plural(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}

export function InventoryPage({ node: openNode }: { node?: string }) {
  const nodes = useCollection(paths.nodes);
  const slices = useCollection(paths.slices);
  const claims = useCollection(paths.claims);
  const canPatch = useCan('patch', 'nodes', '');
  const [filter, setFilter] = useState('');
  const [celOpen, setCelOpen] = useState(false);
  const [cel, setCel] = useState('');
  const [open, setOpen] = useState<Set<string>>(() => new Set(openNode ? [openNode] : []));
  const [busy, setBusy] = useState('');
  const [actionError, setActionError] = useState('');
  const [limit, more] = useRowLimit();

  const devices = useMemo(() => devicesOf(slices.items), [slices.items]);
  const allocations = useMemo(() => allocationsOf(claims.items), [claims.items]);

  const celExpression = celOpen ? cel : '';
  // The slices' version says when the matches may have changed (they are listed here anyway).
  const celState = useCelFilter(celExpression, slices.version);
  const celProblems: CelProblem[] =
    celState.expression === celExpression ? celState.status?.errors || [] : [];
  // The matches of the current expression; null while no (valid) filter applies.
  const matched = useMemo(() => {
    const s = celState.status;
    if (!celExpression.trim() || !s || s.errors?.length) return null;
    return new Set((s.devices || []).map((d) => `${d.driver}/${d.pool}/${d.device}`));
  }, [celState, celExpression]);

  const devicesByNode = useMemo(() => {
    const m = new Map<string, DeviceRow[]>();
    for (const d of devices) {
      if (matched && !matched.has(d.id)) continue;
      m.set(d.node, [...(m.get(d.node) || []), d]);
    }
    return m;
  }, [devices, matched]);
  const allByNode = useMemo(() => {
    const m = new Map<string, DeviceRow[]>();
    for (const d of devices) m.set(d.node, [...(m.get(d.node) || []), d]);
    return m;
  }, [devices]);
  const shown = useMemo(() => {
    const f = filter.trim().toLowerCase();
    let list = nodes.items;
    if (matched) list = list.filter((n) => (devicesByNode.get(n.metadata.name) || []).length > 0);
    if (!f) return list;
    return list.filter((n) => {
      const text = [
        n.metadata.name,
        ...Object.entries(n.metadata.labels || {}).map(([k, v]) => `${k}=${v}`),
        ...(allByNode.get(n.metadata.name) || []).map((d) => d.model),
      ]
        .join(' ')
        .toLowerCase();
      return text.includes(f);
    });
  }, [nodes.items, filter, allByNode, devicesByNode, matched]);


  const setCordon = async (n: K8sObject, unschedulable: boolean) => {
    setBusy(n.metadata.name);
    setActionError('');
    try {
      await request(paths.node(n.metadata.name), {
        method: 'PATCH',
        contentType: 'application/merge-patch+json',
        body: { spec: { unschedulable: unschedulable ? true : null } },
      });
    } catch (e) {
      setActionError(`${unschedulable ? 'Cordon' : 'Uncordon'} ${n.metadata.name}: ${errorText(e)}`);
    } finally {
      setBusy('');
    }
  };

  const toggle = (name: string) =>
    setOpen((s) => {
      const next = new Set(s);
      if (next.has(name)) next.delete(name);
      else next.add(name);
      return next;
    });

  const status = celState.expression === celExpression ? celState.status : null;
  const unbound = devicesByNode.get('') || [];

  return (
    <section aria-labelledby="inventory-title">
      <h1 id="inventory-title">Inventory</h1>
      <ReadOnlyNotice permission={canPatch} />
      <div className="toolbar">
        <label htmlFor="inventory-filter">Filter</label>
        <input
          id="inventory-filter"
          type="search"
          placeholder="node name, label or device model"
          value={filter}
          onChange={(e) => setFilter(e.target.value)}
        />
        <button
          type="button"
          className="secondary"
          aria-expanded={celOpen}
          aria-controls="cel-filter-panel"
          onClick={() => setCelOpen((o) => !o)}
        >
          {celOpen ? 'Remove the CEL filter' : 'Filter by CEL'}
        </button>
        <span className="muted" data-testid="inventory-count">
          {shown.length} of {nodes.items.length} nodes, {devices.length} devices
        </span>
      </div>
      {celOpen && (
        <div id="cel-filter-panel" className="field cel-filter">
          <label htmlFor="cel-filter">CEL filter</label>
          <p className="hint" id="cel-filter-hint">
            Devices for which the expression is true, as a DeviceClass selector sees them, e.g.{' '}
            <code>device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi')) &gt;= 0</code>
          </p>
          <Suspense fallback={<p className="loading">Loading the editor…</p>}>
            <CelEditor
              id="cel-filter"
              label="CEL filter"
              value={cel}
              problems={celProblems}
              describedBy={celProblems.length ? 'cel-filter-error' : 'cel-filter-hint'}
              onChange={setCel}
            />
          </Suspense>
          {celProblems.length > 0 && (
            <ul id="cel-filter-error" className="field-error" role="alert" data-testid="cel-filter-error">
              {celProblems.map((p, i) => (
                <li key={i}>{positioned(p)}</li>
              ))}
            </ul>
          )}
          {celState.error && celState.expression === celExpression && (
            <p role="alert" className="error">
              {celState.error}
            </p>
          )}
          {status && !status.errors?.length && (
            <p role="status" data-testid="cel-filter-summary">
              Matches {plural(status.matchedDevices, 'device')} on {plural(status.nodes, 'node')}
              {status.truncated && ` (the first ${status.devices.length} are shown)`}
            </p>
          )}
          {status && (status.evaluationErrors || []).length > 0 && (
            <details>
              <summary>
                {plural(status.evaluationErrors.length, 'device')} could not be evaluated
              </summary>
              <ul>
                {status.evaluationErrors.map((e, i) => (
                  <li key={i}>{e}</li>
                ))}
              </ul>
            </details>
          )}
        </div>
      )}
      {actionError && (
        <p role="alert" className="error">
          {actionError}
        </p>
      )}
      <LoadState loaded={nodes.loaded} error={nodes.error || slices.error} />
      {nodes.loaded && (!nodes.complete || !slices.complete) && (
        <p className="loading" role="status" data-testid="inventory-loading">
          Loading more: {nodes.items.length} nodes and {slices.items.length} ResourceSlices so far…
        </p>
      )}
      {nodes.loaded && (
        <table className="nodes">
          <thead>
            <tr>
              <th scope="col">Node</th>
              <th scope="col">Ready</th>
              <th scope="col">Scheduling</th>
              <th scope="col">Devices</th>
              <th scope="col">Labels</th>
              <th scope="col">Taints</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {shown.slice(0, limit).map((n) => {
              const name = n.metadata.name;
              const all = allByNode.get(name) || [];
              const list = devicesByNode.get(name) || [];
              const used = all.filter((d) => allocations.has(d.id)).length;
              const ready = nodeReady(n);
              const cordoned = !!n.spec?.unschedulable;
              const isOpen = open.has(name);
              return (
                <Fragment key={name}>
                  <tr data-node={name}>
                    <th scope="row">
                      <button
                        type="button"
                        className="disclosure"
                        aria-expanded={isOpen}
                        aria-controls={`node-${name}`}
                        onClick={() => toggle(name)}
                      >
                        <span aria-hidden="true">{isOpen ? '▾' : '▸'}</span> {name}
                      </button>
                    </th>
                    <td>
                      <Badge kind={ready === 'True' ? 'ok' : ready === 'False' ? 'bad' : 'warn'}>
                        {ready === 'True' ? 'Ready' : ready === 'False' ? 'NotReady' : 'Unknown'}
                      </Badge>
                    </td>
                    <td>
                      {cordoned ? (
                        <Badge kind="warn">SchedulingDisabled</Badge>
                      ) : (
                        <Badge kind="ok">Schedulable</Badge>
                      )}
                    </td>
                    <td data-testid="node-devices">
                      {all.length} ({used} in use)
                      {matched && <>, {list.length} match</>}
                    </td>
                    <td>
                      <Labels labels={n.metadata.labels} />
                    </td>
                    <td>
                      <Taints taints={n.spec?.taints} />
                    </td>
                    <td>
                      <GuardedButton
                        permission={canPatch}
                        disabled={busy === name}
                        onClick={() => setCordon(n, !cordoned)}
                        aria-label={`${cordoned ? 'Uncordon' : 'Cordon'} ${name}`}
                      >
                        {cordoned ? 'Uncordon' : 'Cordon'}
                      </GuardedButton>
                    </td>
                  </tr>
                  {isOpen && (
                    <tr id={`node-${name}`} className="details">
                      <td colSpan={7}>
                        {matched && (
                          <p className="muted">
                            {list.length} of {all.length} devices match the CEL filter.
                          </p>
                        )}
                        <NodeDevices devices={list} allocations={allocations} filtered={!!matched} />
                        <p>
                          <Link to={`/assignments?node=${encodeURIComponent(name)}`}>
                            Assignments on {name}
                          </Link>
                        </p>
                      </td>
                    </tr>
                  )}
                </Fragment>
              );
            })}
          </tbody>
        </table>
      )}
      <ShowMore shown={Math.min(limit, shown.length)} total={shown.length} onMore={more} />
      {unbound.length > 0 && (
        <>
          <h2>Devices not bound to one node</h2>
          <NodeDevices devices={unbound} allocations={allocations} filtered={!!matched} />
        </>
      )}
    </section>
  );
}
