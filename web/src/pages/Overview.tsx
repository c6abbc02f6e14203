import { Suspense, lazy, useEffect, useMemo, useRef, useState } from 'react';
import { K8sObject, UtilizationGroup, errorText, paths, reviewUtilization } from '../api';
import { Link, LoadState } from '../components';
import { nodeReady, pendingPods } from '../model';
import { useTally, useUnboundPods } from '../paged';
import { useChanges } from '../store';

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

// What the node card counts of each Node (one small record per node is kept, not the Node).
function nodeLabels(n: K8sObject): string[] {
  const ready = nodeReady(n);
  const out = [ready === 'True' ? 'ready' : ready === 'False' ? 'notReady' : 'unknown'];
  if (n.spec?.unschedulable) out.push('cordoned');
  return out;
}

export function OverviewPage() {
  // Nodes are counted page by page and kept live as counts; only unbound pods are listed.
  const nodes = useTally(paths.nodes, nodeLabels);
  const pods = useUnboundPods(paths.pods);
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
    const pending = pendingPods(pods.items);
    const reasons = new Map<string, number>();
    for (const p of pending) reasons.set(p.reason, (reasons.get(p.reason) || 0) + 1);
    return {
      devices: total,
      allocated,
      tainted,
      byModel,
      pending: pending.length,
      reasons: Array.from(reasons.entries()),
    };
  }, [devices.groups, pods.items]);
  const count = (label: string) => nodes.counts[label] || 0;

  // The device counts do not wait for the node list: at 5,000 nodes its ten pages arrive after
  // the counts, and the node card counts them as they come.
  const loaded = pods.loaded && devices.groups !== null;
  const error = nodes.error || devices.error || pods.error;
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
                {nodes.loaded ? nodes.total : '…'}
                {nodes.loaded && !nodes.complete ? '+' : ''}
              </dd>
              <dd className="sub" data-testid="count-node-states">
                {nodes.complete ? '' : 'counting so far: '}
                {count('ready')} ready, {count('notReady')} not ready, {count('unknown')} unknown,{' '}
                {count('cordoned')} cordoned
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
