import {
  FormEvent,
  createContext,
  lazy,
  memo,
  useCallback,
  useContext,
  useEffect,
  useMemo,
  useRef,
  useState,
} from 'react';
import {
  ApiError,
  DeviceMatchStatus,
  K8sObject,
  StatusCause,
  attributeText,
  errorText,
  paths,
  request,
  reviewMatches,
} from '../api';
import type { CelProblem } from '../CelEditor';
import {
  Lazy,
  Badge,
  GuardedButton,
  Labels,
  Link,
  LoadState,
  ReadOnlyNotice,
} from '../components';
import {
  CounterSetRow,
  DeviceRow,
  Holder,
  RuleTaint,
  Taint,
  counterSetsOf,
  devicesOf,
  formatQuantityLike,
  nodeReady,
  parseQuantity,
  ruleTaintsOf,
  taintRuleName,
} from '../model';
import { useHeldCount, useHolders } from '../holders';
import { useNodeSliceChanges, useNodeSlices, usePagedCollection } from '../paged';
import { Permission, useCan, useCollection } from '../store';
import { VirtualTable } from '../VirtualTable';
import { useDeviceSummary } from './Overview';

const CelEditor = lazy(() => import('../CelEditor').then((m) => ({ default: m.CelEditor })));

const TAINT_EFFECTS = ['NoSchedule', 'NoExecute', 'None'];
const CEL_DEBOUNCE_MS = 300;
// The most devices a DeviceMatchReview lists (the server's limit); more are counted only.
const CEL_LIMIT = 5000;

function taintText(t: Taint): string {
  return `${t.key}${t.value ? `=${t.value}` : ''}:${t.effect}`;
}

function Taints({ taints }: { taints?: Taint[] }) {
  if (!taints?.length) return <span className="muted">none</span>;
  return (
    <ul className="chips">
      {taints.map((t, i) => (
        <li key={i}>
          <code>{taintText(t)}</code>
        </li>
      ))}
    </ul>
  );
}

// What the device rows need besides the device: allocations, permissions and the
// one taint form open on the page.
interface DeviceContext {
  allocations: Map<string, Holder[]>;
  canCreateRule: Permission;
  canDeleteRule: Permission;
  formFor: string;
  setFormFor: (id: string) => void;
}

const Devices = createContext<DeviceContext | null>(null);

function useDevices(): DeviceContext {
  return useContext(Devices)!;
}

// The form that adds a taint to one device: a DeviceTaintRule selecting its driver, pool and
// name (the server applies it to the device as if the driver had published the taint).
function TaintForm({ device, onDone }: { device: DeviceRow; onDone: () => void }) {
  const [key, setKey] = useState('');
  const [value, setValue] = useState('');
  const [effect, setEffect] = useState('NoSchedule');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState('');
  const [causes, setCauses] = useState<StatusCause[]>([]);
  const keyRef = useRef<HTMLInputElement>(null);
  useEffect(() => keyRef.current?.focus(), []);
  const where = `${device.pool}/${device.name}`;

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError('');
    setCauses([]);
    const taint: Taint = { key: key.trim(), effect };
    if (value.trim()) taint.value = value.trim();
    try {
      await request(paths.taintRules, {
        method: 'POST',
        body: {
          apiVersion: 'resource.k8s.io/v1',
          kind: 'DeviceTaintRule',
          metadata: { name: taintRuleName(device, taint.key || 'taint', effect) },
          spec: {
            deviceSelector: { driver: device.driver, pool: device.pool, device: device.name },
            taint,
          },
        },
      });
      onDone();
    } catch (err) {
      if (err instanceof ApiError) setCauses(err.causes);
      setError(errorText(err));
    } finally {
      setBusy(false);
    }
  };
  const fieldError = (field: string) =>
    causes
      .filter((c) => c.field === `spec.taint.${field}`)
      .map((c) => c.message)
      .join('; ');
  const keyError = fieldError('key');
  const valueError = fieldError('value');

  return (
    <form
      className="taint-form"
      aria-label={`Add a taint to ${where}`}
      onSubmit={submit}
      onKeyDown={(e) => {
        if (e.key === 'Escape') onDone();
      }}
    >
      <div className="field">
        <label htmlFor="taint-key">Key</label>
        <input
          id="taint-key"
          ref={keyRef}
          required
          placeholder="example.com/maintenance"
          value={key}
          onChange={(e) => setKey(e.target.value)}
          aria-invalid={keyError ? true : undefined}
          aria-describedby={keyError ? 'taint-key-error' : undefined}
        />
        {keyError && (
          <p id="taint-key-error" className="field-error">
            {keyError}
          </p>
        )}
      </div>
      <div className="field">
        <label htmlFor="taint-value">Value</label>
        <input
          id="taint-value"
          value={value}
          onChange={(e) => setValue(e.target.value)}
          aria-invalid={valueError ? true : undefined}
          aria-describedby={valueError ? 'taint-value-error' : undefined}
        />
        {valueError && (
          <p id="taint-value-error" className="field-error">
            {valueError}
          </p>
        )}
      </div>
      <div className="field">
        <label htmlFor="taint-effect">Effect</label>
        <select id="taint-effect" value={effect} onChange={(e) => setEffect(e.target.value)}>
          {TAINT_EFFECTS.map((x) => (
            <option key={x} value={x}>
              {x}
            </option>
          ))}
        </select>
      </div>
      <p className="hint">
        NoSchedule: no new allocation of this device. NoExecute: also evicts the pods using it.
        None: only shown.
      </p>
      <div className="actions">
        <button type="submit" disabled={busy}>
          Add taint
        </button>
        <button type="button" className="secondary" onClick={onDone}>
          Cancel
        </button>
      </div>
      {error && (
        <p role="alert" className="error">
          {error}
        </p>
      )}
    </form>
  );
}

function DeviceTaints({ device, fromRules }: { device: DeviceRow; fromRules: RuleTaint[] }) {
  const { canCreateRule, canDeleteRule, formFor, setFormFor } = useDevices();
  const [busy, setBusy] = useState('');
  const [error, setError] = useState('');
  const where = `${device.pool}/${device.name}`;
  const addButton = useRef<HTMLDivElement>(null);
  const formOpen = formFor === device.id;
  const wasOpen = useRef(false);
  // Closing the form (added, cancelled, Escape) puts the focus back on its button.
  useEffect(() => {
    if (wasOpen.current && !formOpen) addButton.current?.querySelector('button')?.focus();
    wasOpen.current = formOpen;
  }, [formOpen]);

  const remove = async (rule: string) => {
    setBusy(rule);
    setError('');
    try {
      await request(paths.taintRule(rule), { method: 'DELETE' });
    } catch (e) {
      setError(`Remove ${rule}: ${errorText(e)}`);
    } finally {
      setBusy('');
    }
  };

  return (
    <div data-testid="device-taints">
      {device.taints.length === 0 && fromRules.length === 0 && <span className="muted">none</span>}
      <ul className="plain taints">
        {device.taints.map((t, i) => (
          <li key={`d${i}`}>
            <code>{taintText(t)}</code> <span className="muted">(from the driver)</span>
          </li>
        ))}
        {fromRules.map((r) => (
          <li key={r.rule} data-rule={r.rule}>
            <code>{taintText(r.taint)}</code>{' '}
            {r.exact ? (
              <GuardedButton
                className="link"
                permission={
                  r.health
                    ? {
                        allowed: false,
                        reason:
                          'Set by the device health reports: the node agent sets it again while the device is unhealthy',
                      }
                    : canDeleteRule
                }
                disabled={busy === r.rule}
                onClick={() => remove(r.rule)}
                aria-label={`Remove taint ${r.taint.key} from ${where}`}
              >
                Remove
              </GuardedButton>
            ) : (
              <span className="muted">
                (DeviceTaintRule <code>{r.rule}</code> selects more devices)
              </span>
            )}
          </li>
        ))}
      </ul>
      {formOpen ? (
        <TaintForm device={device} onDone={() => setFormFor('')} />
      ) : (
        <div ref={addButton}>
          <GuardedButton
            className="secondary small"
            permission={canCreateRule}
            onClick={() => setFormFor(device.id)}
            aria-label={`Add taint to ${where}`}
          >
            Add taint
          </GuardedButton>
        </div>
      )}
      {error && (
        <p role="alert" className="error">
          {error}
        </p>
      )}
    </div>
  );
}

const NO_RULES: RuleTaint[] = [];
const UNHEALTHY_TAINT = 'quartermaster.io/unhealthy';

function DeviceItem({
  d,
  holders,
  fromRules,
}: {
  d: DeviceRow;
  holders: Holder[];
  fromRules: RuleTaint[];
}) {
  // Unhealthy as the allocator and the Overview count it: a quartermaster.io/unhealthy taint,
  // published by the driver or set by a DeviceTaintRule (the node agent's health reports).
  const unhealthy =
    d.taints.find((t) => t.key === UNHEALTHY_TAINT) ||
    fromRules.find((r) => r.taint.key === UNHEALTHY_TAINT)?.taint;
  return (
    <tr data-device={d.id}>
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
          {d.consumes.map((c) => (
            <li key={c.counterSet} data-testid="consumes">
              <span className="k">takes from {c.counterSet}</span>{' '}
              <span className="v">
                {Object.entries(c.counters)
                  .map(([k, v]) => `${k} ${v.value}`)
                  .join(', ')}
              </span>
            </li>
          ))}
        </ul>
      </td>
      <td>
        <DeviceTaints device={d} fromRules={fromRules} />
      </td>
      <td>
        <div data-testid="device-state">
          {unhealthy && (
            <div>
              <Badge kind="bad">unhealthy</Badge>
              {unhealthy.value && <span className="muted"> ({unhealthy.value})</span>}
            </div>
          )}
          {holders.length === 0
            ? !unhealthy && <Badge kind="ok">free</Badge>
            : holders.map((h) => (
                <div key={h.claim + (h.shareId || '')}>
                  <Badge kind="info">{h.shareId ? 'share' : 'allocated'}</Badge> {h.claim}
                </div>
              ))}
        </div>
        <div>
          <Link to={`/assignments?device=${encodeURIComponent(d.id)}`} label={`Assignments of ${d.id}`}>
            assignments
          </Link>
        </div>
      </td>
    </tr>
  );
}

const NO_HOLDERS: Holder[] = [];

// A node's devices (a GPU node has a handful; a pool of thousands is drawn a window at a time).
function DeviceTable({ devices, label }: { devices: DeviceRow[]; label?: string }) {
  const { allocations } = useDevices();
  // DeviceTaintRules are listed and watched while a device table is drawn (a node's details,
  // the devices not bound to one node), not for the node list.
  const rules = useCollection(paths.taintRules);
  const ruleTaints = useMemo(() => ruleTaintsOf(rules.items, devices), [rules.items, devices]);
  return (
    <>
    {rules.error && (
      <p role="alert" className="error">
        DeviceTaintRules: {rules.error}
      </p>
    )}
    <VirtualTable
      aria-label={label}
      items={devices}
      itemKey={(d) => d.id}
      columns={5}
      estimate={120}
      head={
        <thead>
          <tr>
            <th scope="col">Device</th>
            <th scope="col">Attributes</th>
            <th scope="col">Capacity and counters</th>
            <th scope="col">Taints</th>
            <th scope="col">Held by</th>
          </tr>
        </thead>
      }
      renderItem={(d) => (
        <DeviceItem
          d={d}
          holders={allocations.get(d.id) || NO_HOLDERS}
          fromRules={ruleTaints.get(d.id) || NO_RULES}
        />
      )}
    />
    </>
  );
}

// What the allocated partitions of a counter set take now, and what all its partitions would.
export interface CounterUse {
  consumed: Record<string, number>;
  partitioned: Record<string, number>;
  partitions: number;
  allocated: number;
}

function counterUseOf(
  devices: DeviceRow[],
  allocations: Map<string, Holder[]>,
): Map<string, CounterUse> {
  const out = new Map<string, CounterUse>();
  for (const d of devices) {
    for (const c of d.consumes) {
      const id = `${d.driver}/${d.pool}/${c.counterSet}`;
      let u = out.get(id);
      if (!u) {
        u = { consumed: {}, partitioned: {}, partitions: 0, allocated: 0 };
        out.set(id, u);
      }
      const held = allocations.has(d.id);
      u.partitions++;
      if (held) u.allocated++;
      for (const [k, v] of Object.entries(c.counters)) {
        const n = parseQuantity(v.value);
        if (Number.isNaN(n)) continue;
        u.partitioned[k] = (u.partitioned[k] || 0) + n;
        if (held) u.consumed[k] = (u.consumed[k] || 0) + n;
      }
    }
  }
  return out;
}

// The parent GPU a counter set stands for (the agent names it "<gpu>-counter-set").
function parentName(set: string): string {
  return set.endsWith('-counter-set') ? set.slice(0, -'-counter-set'.length) : set;
}

// A GPU split into partitions (MIG): its counter set with the counters the allocated partitions
// consume against the set's total, and the partitions inside it.
function CounterSetBox({
  set,
  name,
  partitions,
  use,
}: {
  set?: CounterSetRow;
  name: string;
  partitions: DeviceRow[];
  use?: CounterUse;
}) {
  const parent = parentName(name);
  const parentUuid = partitions
    .map((d) => d.attributes.parentUUID)
    .find((v) => v !== undefined);
  return (
    <section className="gpu" aria-label={`GPU ${parent}`} data-counter-set={name}>
      <h4>
        GPU {parent}{' '}
        <span className="muted">
          — counter set <code>{name}</code>
          {parentUuid !== undefined && <>, {attributeText(parentUuid)}</>}; {use?.partitions ?? 0}{' '}
          partitions, {use?.allocated ?? 0} in use
        </span>
      </h4>
      {set ? (
        <ul className="counters">
          {Object.entries(set.counters).map(([k, v]) => {
            const total = parseQuantity(v.value);
            const consumed = use?.consumed[k] || 0;
            const partitioned = use?.partitioned[k] || 0;
            const text = `${k} ${formatQuantityLike(consumed, v.value)}/${v.value}`;
            return (
              <li key={k} data-counter={k}>
                <meter min={0} max={total || 1} value={consumed} aria-label={`${k} in use`} />{' '}
                <span data-testid="counter-use">{text}</span> in use{' '}
                <span className="muted">
                  (partitions take {formatQuantityLike(partitioned, v.value)})
                </span>
              </li>
            );
          })}
        </ul>
      ) : (
        <p className="muted">The pool publishes no counter set named {name}.</p>
      )}
      {partitions.length > 0 ? (
        <DeviceTable devices={partitions} label={`Partitions of ${parent}`} />
      ) : (
        <p className="muted">No partition of this GPU is shown.</p>
      )}
    </section>
  );
}

function NodeDevices({
  devices,
  all,
  counterSets,
  filtered,
}: {
  devices: DeviceRow[]; // those shown (the filter's matches)
  all: DeviceRow[]; // every device of the node (what the counters count)
  counterSets: CounterSetRow[];
  filtered: boolean;
}) {
  const { allocations } = useDevices();
  const counterUse = useMemo(() => counterUseOf(all, allocations), [all, allocations]);
  const bySlice = new Map<string, DeviceRow[]>();
  for (const d of devices) bySlice.set(d.slice, [...(bySlice.get(d.slice) || []), d]);
  const setsById = new Map(counterSets.map((s) => [s.id, s]));
  const drawn = new Set<string>();
  if (!devices.length && !counterSets.length) {
    return <p>{filtered ? 'No device of this node matches the filter.' : 'This node publishes no devices.'}</p>;
  }
  return (
    <>
      {Array.from(bySlice.entries()).map(([slice, list]) => {
        const plain = list.filter((d) => d.consumes.length === 0);
        const bySet = new Map<string, DeviceRow[]>();
        for (const d of list) {
          if (!d.consumes.length) continue;
          const id = `${d.driver}/${d.pool}/${d.consumes[0].counterSet}`;
          bySet.set(id, [...(bySet.get(id) || []), d]);
        }
        return (
          <div key={slice} className="slice">
            <h3>
              ResourceSlice <code>{slice}</code> — driver <code>{list[0].driver}</code>, pool{' '}
              <code>{list[0].pool}</code>
            </h3>
            {plain.length > 0 && <DeviceTable devices={plain} />}
            {Array.from(bySet.entries()).map(([id, parts]) => {
              drawn.add(id);
              const name = parts[0].consumes[0].counterSet;
              return (
                <CounterSetBox
                  key={id}
                  set={setsById.get(id)}
                  name={name}
                  partitions={parts}
                  use={counterUse.get(id)}
                />
              );
            })}
          </div>
        );
      })}
      {!filtered &&
        counterSets
          .filter((s) => !drawn.has(s.id))
          .map((s) => (
            <CounterSetBox key={s.id} set={s} name={s.name} partitions={[]} use={counterUse.get(s.id)} />
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

const NODE_COLUMNS = 7;

// One node's row (and its details when open). Memoized on stable props: an event for another
// node, or a page load, does not re-render it. Its devices come from its own ResourceSlices
// (asked for when the row is first drawn), its "in use" count from the holders of its pools (the
// server's DeviceHolderReview), selected as a number so that a claim elsewhere does not re-render
// it.
const NodeItem = memo(function NodeItem({
  node,
  index,
  isOpen,
  busy,
  matched,
  matchCount,
  canPatch,
  onToggle,
  onCordon,
}: {
  node: K8sObject;
  index: number;
  isOpen: boolean;
  busy: boolean;
  matched: Set<string> | null; // the CEL filter's device ids
  matchCount: number;
  canPatch: Permission;
  onToggle: (name: string) => void;
  onCordon: (node: K8sObject, unschedulable: boolean) => void;
}) {
  const name = node.metadata.name;
  const own = useNodeSlices(paths.slices, name);
  // Slices without spec.nodeName may still bind single devices to this node
  // (perDeviceNodeSelection).
  const unbound = useNodeSlices(paths.slices, '');
  const all = useMemo(
    () => [...devicesOf(own.items), ...devicesOf(unbound.items).filter((d) => d.node === name)],
    [own.items, unbound.items, name],
  );
  const counterSets = useMemo(() => counterSetsOf(own.items), [own.items]);
  // (-1 until its pools' holders have arrived)
  const used = useHeldCount(all);
  const list = useMemo(() => (matched ? all.filter((d) => matched.has(d.id)) : all), [all, matched]);
  const ready = nodeReady(node);
  const cordoned = !!node.spec?.unschedulable;
  return (
    <>
      <tr data-node={name} aria-rowindex={index + 2}>
        <th scope="row">
          <button
            type="button"
            className="disclosure"
            aria-expanded={isOpen}
            aria-controls={`node-${name}`}
            onClick={() => onToggle(name)}
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
          {own.loaded ? (
            <>
              {all.length} ({used < 0 ? '… ' : `${used} `}in use)
              {matched && <>, {matchCount} match</>}
            </>
          ) : (
            <span className="muted">…</span>
          )}
        </td>
        <td>
          <Labels labels={node.metadata.labels} />
        </td>
        <td>
          <Taints taints={node.spec?.taints} />
        </td>
        <td>
          <GuardedButton
            permission={canPatch}
            disabled={busy}
            onClick={() => onCordon(node, !cordoned)}
            aria-label={`${cordoned ? 'Uncordon' : 'Cordon'} ${name}`}
          >
            {cordoned ? 'Uncordon' : 'Cordon'}
          </GuardedButton>
        </td>
      </tr>
      {isOpen && (
        <tr id={`node-${name}`} className="details">
          <td colSpan={NODE_COLUMNS}>
            {matched && (
              <p className="muted">
                {list.length} of {all.length} devices match the CEL filter.
              </p>
            )}
            {own.loaded ? (
              <NodeDevices devices={list} all={all} counterSets={counterSets} filtered={!!matched} />
            ) : (
              <p className="loading">Loading the devices…</p>
            )}
            <p>
              <Link to={`/assignments?node=${encodeURIComponent(name)}`}>Assignments on {name}</Link>
            </p>
          </td>
        </tr>
      )}
    </>
  );
});

// Devices of slices not bound to one node (network-attached, or every node).
function UnboundDevices({ matched }: { matched: Set<string> | null }) {
  const slices = useNodeSlices(paths.slices, '');
  const all = useMemo(() => devicesOf(slices.items).filter((d) => d.node === ''), [slices.items]);
  useHeldCount(all); // their holders, while drawn
  const sets = useMemo(() => counterSetsOf(slices.items).filter((s) => s.node === ''), [slices.items]);
  const list = useMemo(() => (matched ? all.filter((d) => matched.has(d.id)) : all), [all, matched]);
  if (!list.length && (matched || !sets.length)) return null;
  return (
    <>
      <h2>Devices not bound to one node</h2>
      <NodeDevices devices={list} all={all} counterSets={sets} filtered={!!matched} />
    </>
  );
}

const NODES_HEAD = (
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
);

export function InventoryPage({ node: openNode }: { node?: string }) {
  // Nodes page by page as the table scrolls; each drawn node's slices when it is drawn.
  const nodes = usePagedCollection(paths.nodes);
  // Who holds the drawn nodes' devices: the server's DeviceHolderReview for their pools, asked
  // again when the ClusterSummary says a claim changed (no claim is listed or watched).
  const slicesChanged = useNodeSliceChanges(paths.slices);
  // The device total is the server's count (the same review as the Overview's).
  const summary = useDeviceSummary(String(slicesChanged));
  const deviceTotal = summary.groups?.reduce((n, g) => n + (g.devices || 0), 0);
  const canPatch = useCan('patch', 'nodes', '');
  const canCreateRule = useCan('create', 'devicetaintrules', 'resource.k8s.io');
  const canDeleteRule = useCan('delete', 'devicetaintrules', 'resource.k8s.io');
  const [filter, setFilter] = useState('');
  const [celOpen, setCelOpen] = useState(false);
  const [cel, setCel] = useState('');
  const [open, setOpen] = useState<Set<string>>(() => new Set(openNode ? [openNode] : []));
  const [busy, setBusy] = useState('');
  const [actionError, setActionError] = useState('');
  const [formFor, setFormFor] = useState('');

  const { allocations, error: holdersError } = useHolders(nodes.loaded);

  const celExpression = celOpen ? cel : '';
  // Any slice change may change the matches.
  const celState = useCelFilter(celExpression, slicesChanged);
  const celProblems: CelProblem[] =
    celState.expression === celExpression ? celState.status?.errors || [] : [];
  // The matches of the current expression; null while no (valid) filter applies.
  const matched = useMemo(() => {
    const s = celState.status;
    if (!celExpression.trim() || !s || s.errors?.length) return null;
    return new Set((s.devices || []).map((d) => `${d.driver}/${d.pool}/${d.device}`));
  }, [celState, celExpression]);
  const matchesByNode = useMemo(() => {
    const m = new Map<string, number>();
    if (!matched) return m;
    for (const d of celState.status?.devices || []) {
      if (d.nodeName) m.set(d.nodeName, (m.get(d.nodeName) || 0) + 1);
    }
    return m;
  }, [celState, matched]);

  const f = filter.trim().toLowerCase();
  // The filters see the loaded nodes: while one is set (or a linked node is not loaded yet),
  // every page is loaded.
  const needAll =
    !!f || !!matched || (!!openNode && !nodes.items.some((n) => n.metadata.name === openNode));
  const { wantAll } = nodes;
  useEffect(() => (needAll ? wantAll() : undefined), [needAll, wantAll]);

  const shown = useMemo(() => {
    let list = nodes.items;
    if (matched) list = list.filter((n) => matchesByNode.has(n.metadata.name));
    if (!f) return list;
    return list.filter((n) => {
      const text = [
        n.metadata.name,
        ...Object.entries(n.metadata.labels || {}).map(([k, v]) => `${k}=${v}`),
      ]
        .join(' ')
        .toLowerCase();
      return text.includes(f);
    });
  }, [nodes.items, f, matched, matchesByNode]);

  const setCordon = useCallback(async (n: K8sObject, unschedulable: boolean) => {
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
  }, []);

  const toggle = useCallback(
    (name: string) =>
      setOpen((s) => {
        const next = new Set(s);
        if (next.has(name)) next.delete(name);
        else next.add(name);
        return next;
      }),
    [],
  );

  const context = useMemo<DeviceContext>(
    () => ({ allocations, canCreateRule, canDeleteRule, formFor, setFormFor }),
    [allocations, canCreateRule, canDeleteRule, formFor],
  );
  const status = celState.expression === celExpression ? celState.status : null;

  return (
    <section aria-labelledby="inventory-title">
      <h1 id="inventory-title">Inventory</h1>
      <ReadOnlyNotice permission={canPatch} />
      <ReadOnlyNotice permission={canCreateRule} />
      <div className="toolbar">
        <label htmlFor="inventory-filter">Filter</label>
        <input
          id="inventory-filter"
          type="search"
          placeholder="node name or label"
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
          {shown.length} of {nodes.items.length}
          {nodes.complete ? '' : '+'} nodes, {deviceTotal ?? '…'} devices
        </span>
      </div>
      {celOpen && (
        <div id="cel-filter-panel" className="field cel-filter">
          <label htmlFor="cel-filter">CEL filter</label>
          <p className="hint" id="cel-filter-hint">
            Devices for which the expression is true, as a DeviceClass selector sees them, e.g.{' '}
            <code>device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi')) &gt;= 0</code>
          </p>
          <Lazy what="the editor">
            <CelEditor
              id="cel-filter"
              label="CEL filter"
              value={cel}
              problems={celProblems}
              describedBy={celProblems.length ? 'cel-filter-error' : 'cel-filter-hint'}
              onChange={setCel}
            />
          </Lazy>
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
      <LoadState loaded={nodes.loaded} error={nodes.error || holdersError} />
      {nodes.loading && (
        <p className="loading" role="status" data-testid="inventory-loading">
          Loading more nodes: {nodes.items.length} so far…
        </p>
      )}
      <Devices.Provider value={context}>
        {nodes.loaded && (
          <VirtualTable
            className="nodes"
            aria-label="Nodes"
            items={shown}
            itemKey={nodeKey}
            columns={NODE_COLUMNS}
            head={NODES_HEAD}
            rowCount={nodes.complete || f || matched ? shown.length + 1 : -1}
            onEndReached={nodes.loadMore}
            renderItem={(n, i) => (
              <NodeItem
                node={n}
                index={i}
                isOpen={open.has(n.metadata.name)}
                busy={busy === n.metadata.name}
                matched={matched}
                matchCount={matchesByNode.get(n.metadata.name) || 0}
                canPatch={canPatch}
                onToggle={toggle}
                onCordon={setCordon}
              />
            )}
          />
        )}
        {nodes.loaded && !nodes.complete && !nodes.loading && (
          <p className="more">
            {nodes.items.length} nodes loaded; more load as you scroll.{' '}
            <button type="button" onClick={nodes.loadMore}>
              Load more
            </button>
          </p>
        )}
        <UnboundDevices matched={matched} />
      </Devices.Provider>
    </section>
  );
}

const nodeKey = (n: K8sObject) => n.metadata.name;


