import { Suspense, lazy, useEffect, useMemo, useRef, useState } from 'react';
import { UtilizationGroup, errorText, paths, reviewUtilization } from '../api';
import { Link, LoadState } from '../components';
import { nodeReady, pendingPods } from '../model';
import { useChanges, useCollection } from '../store';

// uPlot is loaded with the chart, after the counts are on screen.
const UtilizationChart = lazy(() =>
  import('../UtilizationChart').then((m) => ({ default: m.UtilizationChart })),
);

// Device counts come from the server (a one-bucket UtilizationHistoryReview by model: devices,
// tainted and allocated now), asked for again when slices or claims change, so the Overview never
// lists every ResourceSlice of a large fleet.
export function useDeviceSummary(changeKey: string) {
  const [groups, setGroups] = useState<UtilizationGroup[] | null>(null);
  const [error, setError] = useState('');
  const last = useRef(0);
  useEffect(() => {
    let current = true;
    const wait = Math.max(0, last.current + REFRESH_MS - Date.now());
    const timer = window.setTimeout(() => {
      last.current = Date.now();
      reviewUtilization({ range: '1m', step: '1m', groupBy: 'model' })
        .then((s) => {
          if (!current) return;
          setGroups(s.groups);
          setError('');
        })
        .catch((e) => current && setError(errorText(e)));
    }, wait);
    return () => {
      current = false;
      window.clearTimeout(timer);
    };
  }, [changeKey]);
  return { groups, error };
}

const REFRESH_MS = 500;

export function OverviewPage() {
  const nodes = useCollection(paths.nodes);
  const pods = useCollection(paths.pods);
  const slicesChanged = useChanges(paths.slices);
  const claimsChanged = useChanges(paths.claims);
  const devices = useDeviceSummary(`${slicesChanged}/${claimsChanged}`);

  const summary = useMemo(() => {
    const byModel: [string, { total: number; allocated: number; tainted: number }][] = [];
    let total = 0;
    let allocated = 0;
    let tainted = 0;
    for (const g of devices.groups || []) {
      const m = {
        total: g.devices || 0,
        allocated: g.allocated[g.allocated.length - 1] || 0,
        tainted: g.tainted || 0,
      };
      byModel.push([g.name, m]);
      total += m.total;
      allocated += m.allocated;
      tainted += m.tainted;
    }
    byModel.sort((a, b) => a[0].localeCompare(b[0]));
    const ready = nodes.items.filter((n) => nodeReady(n) === 'True').length;
    const notReady = nodes.items.filter((n) => nodeReady(n) === 'False').length;
    const cordoned = nodes.items.filter((n) => n.spec?.unschedulable).length;
    const pending = pendingPods(pods.items);
    const reasons = new Map<string, number>();
    for (const p of pending) reasons.set(p.reason, (reasons.get(p.reason) || 0) + 1);
    return {
      devices: total,
      allocated,
      tainted,
      byModel,
      ready,
      notReady,
      cordoned,
      pending: pending.length,
      reasons: Array.from(reasons.entries()),
    };
  }, [nodes.items, devices.groups, pods.items]);

  // The device counts do not wait for the node list: at 5,000 nodes its ten pages arrive after
  // the counts, and the node card counts them as they come.
  const loaded = pods.complete && devices.groups !== null;
  const error = nodes.error || pods.error || devices.error;
  return (
    <section aria-labelledby="overview-title">
      <h1 id="overview-title">Overview</h1>
      <LoadState loaded={loaded} error={error} />
      {loaded && (
        <>
          <dl className="cards">
            <div className="card">
              <dt>Nodes</dt>
              <dd data-testid="count-nodes" aria-busy={!nodes.complete}>
                {nodes.items.length}
                {nodes.complete ? '' : '+'}
              </dd>
              <dd className="sub">
                {nodes.complete ? '' : 'counting so far: '}
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
          <Suspense fallback={<p className="loading">Loading the utilization chart…</p>}>
            <UtilizationChart changeKey={claimsChanged} />
          </Suspense>
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
