import { useMemo } from 'react';
import { paths } from '../api';
import { Link, LoadState } from '../components';
import { allocationsOf, devicesOf, nodeReady, pendingPods } from '../model';
import { useCollection } from '../store';
import { UtilizationChart } from '../UtilizationChart';

export function OverviewPage() {
  const nodes = useCollection(paths.nodes);
  const slices = useCollection(paths.slices);
  const claims = useCollection(paths.claims);
  const pods = useCollection(paths.pods);

  const summary = useMemo(() => {
    const devices = devicesOf(slices.items);
    const allocations = allocationsOf(claims.items);
    const byModel = new Map<string, { total: number; allocated: number; tainted: number }>();
    let allocated = 0;
    let tainted = 0;
    for (const d of devices) {
      const m = byModel.get(d.model) || { total: 0, allocated: 0, tainted: 0 };
      m.total++;
      if (allocations.has(d.id)) {
        m.allocated++;
        allocated++;
      }
      if (d.taints.length) {
        m.tainted++;
        tainted++;
      }
      byModel.set(d.model, m);
    }
    const ready = nodes.items.filter((n) => nodeReady(n) === 'True').length;
    const notReady = nodes.items.filter((n) => nodeReady(n) === 'False').length;
    const cordoned = nodes.items.filter((n) => n.spec?.unschedulable).length;
    const pending = pendingPods(pods.items);
    const reasons = new Map<string, number>();
    for (const p of pending) reasons.set(p.reason, (reasons.get(p.reason) || 0) + 1);
    return {
      devices: devices.length,
      allocated,
      tainted,
      byModel: Array.from(byModel.entries()).sort((a, b) => a[0].localeCompare(b[0])),
      ready,
      notReady,
      cordoned,
      pending: pending.length,
      reasons: Array.from(reasons.entries()),
    };
  }, [nodes.items, slices.items, claims.items, pods.items]);

  const loaded = nodes.loaded && slices.loaded && claims.loaded && pods.loaded;
  const error = nodes.error || slices.error || claims.error || pods.error;
  return (
    <section aria-labelledby="overview-title">
      <h1 id="overview-title">Overview</h1>
      <LoadState loaded={loaded} error={error} />
      {loaded && (
        <>
          <dl className="cards">
            <div className="card">
              <dt>Nodes</dt>
              <dd data-testid="count-nodes">{nodes.items.length}</dd>
              <dd className="sub">
                {summary.ready} ready, {summary.notReady} not ready,{' '}
                {nodes.items.length - summary.ready - summary.notReady} unknown, {summary.cordoned}{' '}
                cordoned
              </dd>
            </div>
            <div className="card">
              <dt>Devices</dt>
              <dd data-testid="count-devices">{summary.devices}</dd>
              <dd className="sub">{summary.tainted} tainted</dd>
            </div>
            <div className="card">
              <dt>Allocated</dt>
              <dd data-testid="count-allocated">{summary.allocated}</dd>
            </div>
            <div className="card">
              <dt>Free</dt>
              <dd data-testid="count-free">{summary.devices - summary.allocated}</dd>
            </div>
            <div className="card">
              <dt>Pending pods</dt>
              <dd data-testid="count-pending">{summary.pending}</dd>
            </div>
          </dl>
          <UtilizationChart changeKey={claims.version} />
          <h2>Devices by model</h2>
          <table>
            <thead>
              <tr>
                <th scope="col">Model</th>
                <th scope="col">Devices</th>
                <th scope="col">Allocated</th>
                <th scope="col">Free</th>
                <th scope="col">Tainted</th>
              </tr>
            </thead>
            <tbody>
              {summary.byModel.map(([model, m]) => (
                <tr key={model}>
                  <th scope="row">{model}</th>
                  <td>{m.total}</td>
                  <td>{m.allocated}</td>
                  <td>{m.total - m.allocated}</td>
                  <td>{m.tainted}</td>
                </tr>
              ))}
            </tbody>
          </table>
          <h2>Pending pods by reason</h2>
          {summary.reasons.length === 0 ? (
            <p>No pod is waiting.</p>
          ) : (
            <ul>
              {summary.reasons.map(([reason, n]) => (
                <li key={reason}>
                  {reason}: {n} — <Link to="/pending">see Pending</Link>
                </li>
              ))}
            </ul>
          )}
        </>
      )}
    </section>
  );
}
