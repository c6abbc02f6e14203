import { Fragment, useMemo, useState } from 'react';
import { K8sObject, attributeText, errorText, paths, request } from '../api';
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
}: {
  devices: DeviceRow[];
  allocations: Map<string, Holder[]>;
}) {
  const bySlice = new Map<string, DeviceRow[]>();
  for (const d of devices) bySlice.set(d.slice, [...(bySlice.get(d.slice) || []), d]);
  if (!devices.length) return <p>This node publishes no devices.</p>;
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
                  <tr key={d.id}>
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

export function InventoryPage({ node: openNode }: { node?: string }) {
  const nodes = useCollection(paths.nodes);
  const slices = useCollection(paths.slices);
  const claims = useCollection(paths.claims);
  const canPatch = useCan('patch', 'nodes', '');
  const [filter, setFilter] = useState('');
  const [open, setOpen] = useState<Set<string>>(() => new Set(openNode ? [openNode] : []));
  const [busy, setBusy] = useState('');
  const [actionError, setActionError] = useState('');
  const [limit, more] = useRowLimit();

  const devices = useMemo(() => devicesOf(slices.items), [slices.items]);
  const allocations = useMemo(() => allocationsOf(claims.items), [claims.items]);
  const devicesByNode = useMemo(() => {
    const m = new Map<string, DeviceRow[]>();
    for (const d of devices) m.set(d.node, [...(m.get(d.node) || []), d]);
    return m;
  }, [devices]);

  const shown = useMemo(() => {
    const f = filter.trim().toLowerCase();
    if (!f) return nodes.items;
    return nodes.items.filter((n) => {
      const text = [
        n.metadata.name,
        ...Object.entries(n.metadata.labels || {}).map(([k, v]) => `${k}=${v}`),
        ...(devicesByNode.get(n.metadata.name) || []).map((d) => d.model),
      ]
        .join(' ')
        .toLowerCase();
      return text.includes(f);
    });
  }, [nodes.items, filter, devicesByNode]);

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
        <span className="muted">
          {shown.length} of {nodes.items.length} nodes, {devices.length} devices
        </span>
      </div>
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
              const list = devicesByNode.get(name) || [];
              const used = list.filter((d) => allocations.has(d.id)).length;
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
                    <td>
                      {list.length} ({used} in use)
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
                        <NodeDevices devices={list} allocations={allocations} />
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
      {(devicesByNode.get('') || []).length > 0 && (
        <>
          <h2>Devices not bound to one node</h2>
          <NodeDevices devices={devicesByNode.get('') || []} allocations={allocations} />
        </>
      )}
    </section>
  );
}
