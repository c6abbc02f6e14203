import { ReactNode, useMemo } from 'react';
import { paths } from '../api';
import { Link, LoadState } from '../components';
import { pendingPods } from '../model';
import { useCollection } from '../store';

// Links the device classes, nodes and quotas a scheduler message names to their pages.
function Explained({ message, classes, nodes }: { message: string; classes: string[]; nodes: string[] }) {
  const names = [
    ...classes.map((n) => ({ n, to: `/device-classes/${encodeURIComponent(n)}` })),
    ...nodes.map((n) => ({ n, to: `/inventory/${encodeURIComponent(n)}` })),
  ].sort((a, b) => b.n.length - a.n.length);
  const parts: ReactNode[] = [];
  let rest = message;
  let key = 0;
  while (rest) {
    let best: { at: number; n: string; to: string } | null = null;
    for (const x of names) {
      const at = rest.indexOf(x.n);
      if (at >= 0 && (!best || at < best.at)) best = { at, ...x };
    }
    if (!best) {
      parts.push(rest);
      break;
    }
    parts.push(rest.slice(0, best.at));
    parts.push(
      <Link key={key++} to={best.to}>
        {best.n}
      </Link>,
    );
    rest = rest.slice(best.at + best.n.length);
  }
  const quota = /quota/i.test(message);
  return (
    <>
      {parts}
      {quota && (
        <>
          {' '}
          (<Link to="/quotas">Quotas</Link>)
        </>
      )}
    </>
  );
}

export function PendingPage() {
  const pods = useCollection(paths.pods);
  const classes = useCollection(paths.classes);
  const nodes = useCollection(paths.nodes);
  const pending = useMemo(() => pendingPods(pods.items), [pods.items]);
  const classNames = classes.items.map((c) => c.metadata.name);
  const nodeNames = nodes.items.map((n) => n.metadata.name);
  return (
    <section aria-labelledby="pending-title">
      <h1 id="pending-title">Pending</h1>
      <p>Pods the scheduler could not place yet, with its explanation.</p>
      <LoadState loaded={pods.loaded} error={pods.error} />
      {pods.loaded && pending.length === 0 && <p>No pod is waiting.</p>}
      {pending.length > 0 && (
        <table>
          <thead>
            <tr>
              <th scope="col">Namespace</th>
              <th scope="col">Pod</th>
              <th scope="col">Reason</th>
              <th scope="col">Explanation</th>
            </tr>
          </thead>
          <tbody>
            {pending.map((p) => (
              <tr key={`${p.pod.metadata.namespace}/${p.pod.metadata.name}`}>
                <td>{p.pod.metadata.namespace}</td>
                <th scope="row">{p.pod.metadata.name}</th>
                <td>{p.reason}</td>
                <td>
                  <Explained message={p.message} classes={classNames} nodes={nodeNames} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
