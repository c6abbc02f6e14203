import { lazy, useEffect, useMemo, useRef, useState } from 'react';
import { K8sObject, UtilizationGroup, errorText, paths, reviewUtilization, withQuery } from '../api';
import { Lazy, Link, LoadState, age } from '../components';
import { pendingPods } from '../model';
import { useUnboundPods } from '../paged';
import { useClusterSummary, useCollectionWhen, useKindChanges } from '../store';

// uPlot is loaded with the chart, after the counts are on screen.
const UtilizationChart = lazy(() =>
  import('../UtilizationChart').then((m) => ({ default: m.UtilizationChart })),
);

// Device counts come from the server (a one-bucket UtilizationHistoryReview by model: devices,
// tainted and allocated now), asked for again when slices, claims or taint rules change (the
// ClusterSummary's lastChanges), so the Overview never lists every ResourceSlice of a large fleet.
export function useDeviceSummary(changeKey: string) {
  const [groups, setGroups] = useState<UtilizationGroup[] | null>(null);
  const [error, setError] = useState('');
  const last = useRef(0);
  // Answers apply in the order asked (a newer request does not drop an older answer still on its
  // way: the first counts are drawn from the first answer, while the change signals arrive).
  const asked = useRef(0);
  const applied = useRef(0);
  const mounted = useRef(true);
  useEffect(() => {
    mounted.current = true;
    return () => {
      mounted.current = false;
    };
  }, []);
  useEffect(() => {
    const wait = Math.max(0, last.current + REFRESH_MS - Date.now());
    const timer = window.setTimeout(() => {
      last.current = Date.now();
      const n = ++asked.current;
      const fresh = () => mounted.current && n > applied.current;
      reviewUtilization({ range: '1m', step: '1m', groupBy: 'model' })
        .then((s) => {
          if (!fresh()) return;
          applied.current = n;
          setGroups(s.groups);
          setError('');
        })
        .catch((e) => fresh() && setError(errorText(e)));
    }, wait);
    return () => window.clearTimeout(timer);
  }, [changeKey]);
  return { groups, error };
}

const REFRESH_MS = 500;

// Warning Events (type is a selectable field of Events, as in Kubernetes).
const WARNINGS = withQuery(paths.events, { fieldSelector: 'type=Warning' });
const RECENT_WARNINGS = 10;

function eventTime(e: K8sObject): string {
  const x = e as K8sObject & { lastTimestamp?: string; eventTime?: string; firstTimestamp?: string };
  return x.lastTimestamp || x.eventTime || x.firstTimestamp || e.metadata.creationTimestamp || '';
}

// Where the UI shows the object an event is about.
function involvedLink(o: { kind?: string; namespace?: string; name?: string }): string {
  if (o.kind === 'Node' && o.name) return `/inventory/${encodeURIComponent(o.name)}`;
  if (o.kind === 'Pod') return '/pending';
  if (o.kind === 'DeviceClass' && o.name) return `/device-classes/${encodeURIComponent(o.name)}`;
  if (o.kind === 'ResourceClaim') return `/assignments`;
  return '';
}

// The newest warning events (scheduling failures, objects the server could not decode, ...):
// listed (page by page) once the counts are on screen, then watched (fieldSelector=type=Warning).
// The Overview holds three watches (the ClusterSummary, unbound pods, these events) of the six
// HTTP/1.1 connections a browser opens to a server.
function RecentWarnings({ enabled }: { enabled: boolean }) {
  const events = useCollectionWhen(WARNINGS, enabled);
  const recent = useMemo(() => {
    const sorted = events.items.map((e) => ({ e, t: eventTime(e) }));
    sorted.sort((a, b) => (a.t < b.t ? 1 : a.t > b.t ? -1 : 0));
    return sorted.slice(0, RECENT_WARNINGS).map((x) => x.e);
  }, [events.items]);
  return (
    <section aria-labelledby="warnings-title">
      <h2 id="warnings-title">Recent warning events</h2>
      <LoadState loaded={events.loaded} error={events.error} />
      {events.loaded && recent.length === 0 && <p>No warning event.</p>}
      {recent.length > 0 && (
        <table data-testid="warning-events">
          <caption className="muted">
            The newest {recent.length} of {events.items.length} warning events
          </caption>
          <thead>
            <tr>
              <th scope="col">Age</th>
              <th scope="col">Object</th>
              <th scope="col">Reason</th>
              <th scope="col">Message</th>
              <th scope="col">Count</th>
            </tr>
          </thead>
          <tbody>
            {recent.map((e) => {
              const x = e as K8sObject & { involvedObject?: { kind?: string; namespace?: string; name?: string }; reason?: string; message?: string; count?: number };
              const o = x.involvedObject || {};
              const what = `${o.kind || ''} ${o.namespace ? `${o.namespace}/` : ''}${o.name || ''}`.trim();
              const to = involvedLink(o);
              const t = eventTime(e);
              return (
                <tr key={`${e.metadata.namespace}/${e.metadata.name}`} data-event-reason={x.reason}>
                  <td>
                    <time dateTime={t} title={t}>
                      {age(t)} ago
                    </time>
                  </td>
                  <th scope="row">{to ? <Link to={to}>{what}</Link> : what}</th>
                  <td>{x.reason}</td>
                  <td>{x.message}</td>
                  <td>{x.count ?? 1}</td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
    </section>
  );
}

export function OverviewPage() {
  // Nodes are counted by the server (the ClusterSummary, watched), whose lastChanges also say
  // when to ask for the device counts again; only unbound pods are listed.
  const cluster = useClusterSummary();
  const nodes = cluster.status?.nodes;
  const pods = useUnboundPods(paths.pods);
  const devicesChanged = useKindChanges('resourceslices', 'resourceclaims', 'devicetaintrules');
  const devices = useDeviceSummary(String(devicesChanged));

  const summary = useMemo(() => {
    type Counts = { total: number; allocated: number; unhealthy: number; free: number; tainted: number };
    const byModel: [string, Counts][] = [];
    let total = 0;
    let allocated = 0;
    let unhealthy = 0;
    let free = 0;
    let tainted = 0;
    const last = (v?: number[]) => (v && v.length ? v[v.length - 1] : 0);
    for (const g of devices.groups || []) {
      // The server's split: allocated + unhealthy (tainted unhealthy, not allocated) + free.
      const m: Counts = {
        total: g.devices || 0,
        allocated: last(g.allocated),
        unhealthy: last(g.unhealthy),
        free: 0,
        tainted: g.tainted || 0,
      };
      m.free = g.free ? last(g.free) : Math.max(0, m.total - m.allocated - m.unhealthy);
      byModel.push([g.name, m]);
      total += m.total;
      allocated += m.allocated;
      unhealthy += m.unhealthy;
      free += m.free;
      tainted += m.tainted;
    }
    byModel.sort((a, b) => a[0].localeCompare(b[0]));
    const pending = pendingPods(pods.items);
    const reasons = new Map<string, number>();
    for (const p of pending) reasons.set(p.reason, (reasons.get(p.reason) || 0) + 1);
    return {
      devices: total,
      allocated,
      unhealthy,
      free,
      tainted,
      byModel,
      pending: pending.length,
      reasons: Array.from(reasons.entries()),
    };
  }, [devices.groups, pods.items]);

  // The device counts do not wait for the node counts (nor the other way round).
  const loaded = pods.loaded && devices.groups !== null;
  const error = cluster.error || devices.error || pods.error;
  return (
    <section aria-labelledby="overview-title">
      <h1 id="overview-title">Overview</h1>
      <LoadState loaded={loaded} error={error} />
      {loaded && (
        <>
          <dl className="cards">
            <div className="card">
              <dt>Nodes</dt>
              <dd data-testid="count-nodes" aria-busy={!nodes}>
                {nodes ? nodes.total : '…'}
              </dd>
              {nodes && (
                <dd className="sub" data-testid="count-node-states">
                  {nodes.ready} ready, {nodes.notReady} not ready, {nodes.unknown} unknown, {nodes.unschedulable}{' '}
                  cordoned
                </dd>
              )}
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
              <dd data-testid="count-free">{summary.free}</dd>
            </div>
            <div className="card">
              <dt>Unhealthy</dt>
              <dd data-testid="count-unhealthy">{summary.unhealthy}</dd>
              <dd className="sub">tainted unhealthy, not allocated</dd>
            </div>
            <div className="card">
              <dt>Pending pods</dt>
              <dd data-testid="count-pending">{summary.pending}</dd>
            </div>
          </dl>
          <Lazy what="the utilization chart">
            <UtilizationChart changeKey={devicesChanged} />
          </Lazy>
          <h2>Devices by model</h2>
          <table>
            <thead>
              <tr>
                <th scope="col">Model</th>
                <th scope="col">Devices</th>
                <th scope="col">Allocated</th>
                <th scope="col">Free</th>
                <th scope="col">Unhealthy</th>
                <th scope="col">Tainted</th>
              </tr>
            </thead>
            <tbody>
              {summary.byModel.map(([model, m]) => (
                <tr key={model}>
                  <th scope="row">{model}</th>
                  <td>{m.total}</td>
                  <td>{m.allocated}</td>
                  <td>{m.free}</td>
                  <td>{m.unhealthy}</td>
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
          <RecentWarnings enabled={loaded} />
        </>
      )}
    </section>
  );
}
