import { useMemo, useState } from 'react';
import { Json, paths } from '../api';
import { Badge, Link, LoadState, ShowMore, useRowLimit } from '../components';
import { allocationNode, devicesOf } from '../model';
import { useCollection } from '../store';

export function AssignmentsPage() {
  const claims = useCollection(paths.claims);
  const slices = useCollection(paths.slices);
  const initial = new URLSearchParams(window.location.search).get('node') || '';
  const [filter, setFilter] = useState(initial);
  const [limit, more] = useRowLimit();

  const devices = useMemo(() => new Map(devicesOf(slices.items).map((d) => [d.id, d])), [slices.items]);
  const rows = useMemo(() => {
    const out = claims.items
      .filter((c) => c.status?.allocation)
      .map((c) => {
        const results: Json[] = c.status.allocation.devices?.results || [];
        const consumers: Json[] = (c.status.reservedFor || []).filter(
          (r: Json) => !r.resource || r.resource === 'pods',
        );
        return {
          claim: c,
          key: `${c.metadata.namespace}/${c.metadata.name}`,
          node: allocationNode(c, devices),
          results,
          consumers,
        };
      });
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

  return (
    <section aria-labelledby="assignments-title">
      <h1 id="assignments-title">Assignments</h1>
      <p>Every allocated ResourceClaim, live: its devices, node and the pods using it.</p>
      <div className="toolbar">
        <label htmlFor="assignments-filter">Filter</label>
        <input
          id="assignments-filter"
          type="search"
          placeholder="claim, node, device or pod"
          value={filter}
          onChange={(e) => setFilter(e.target.value)}
        />
        <span className="muted" data-testid="assignment-count">
          {rows.length} allocated claims
        </span>
      </div>
      <LoadState loaded={claims.loaded} error={claims.error} />
      {claims.loaded && rows.length === 0 && <p>No claim is allocated.</p>}
      {rows.length > 0 && (
        <table>
          <thead>
            <tr>
              <th scope="col">Claim</th>
              <th scope="col">Devices</th>
              <th scope="col">Node</th>
              <th scope="col">Consumers</th>
            </tr>
          </thead>
          <tbody>
            {rows.slice(0, limit).map((r) => (
              <tr key={r.key} data-claim={r.key}>
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
            ))}
          </tbody>
        </table>
      )}
      <ShowMore shown={Math.min(limit, rows.length)} total={rows.length} onMore={more} />
    </section>
  );
}
