import { ReactNode, memo, useEffect, useMemo, useRef, useState } from 'react';
import { errorText, paths, request, withQuery } from '../api';
import { Link, LoadState } from '../components';
import { PendingPod, pendingPods } from '../model';
import { useUnboundPods } from '../paged';
import { VirtualTable } from '../VirtualTable';

// Words of a scheduler message that could name a DeviceClass or a Node (DNS subdomains, not
// numbers): each is looked up by name, once per page, instead of listing every node.
function candidates(message: string): string[] {
  const out = new Set<string>();
  for (const m of message.matchAll(/[a-z0-9](?:[-a-z0-9.]*[a-z0-9])?/g)) {
    const w = m[0];
    if (w.length <= 253 && !/^[0-9.]+$/.test(w)) out.add(w);
  }
  return Array.from(out);
}

const LOOKUPS = 3; // at a time (the pods' watch holds one of the browser's six connections)

// Which of `words` name an existing DeviceClass or Node (a list with fieldSelector=metadata.name,
// which answers an empty list rather than 404), asked once per word while the page is open.
function useNamedObjects(words: string[]): { classes: string[]; nodes: string[] } {
  const known = useRef(new Map<string, { cls: boolean; node: boolean } | null>());
  const [version, setVersion] = useState(0);
  const key = words.join(' ');
  useEffect(() => {
    const queue = key ? key.split(' ').filter((w) => !known.current.has(w)) : [];
    for (const w of queue) known.current.set(w, null);
    const exists = async (path: string, name: string) => {
      const list = await request(withQuery(path, { fieldSelector: `metadata.name=${name}`, limit: '1' }));
      return (list.items || []).length > 0;
    };
    const worker = async () => {
      for (let w = queue.shift(); w !== undefined; w = queue.shift()) {
        try {
          const [cls, node] = await Promise.all([exists(paths.classes, w), exists(paths.nodes, w)]);
          known.current.set(w, { cls, node });
          // (also after the messages changed: the words stay known)
          if (cls || node) setVersion((v) => v + 1);
        } catch (e) {
          known.current.delete(w); // asked again when the messages change
          console.warn(`Pending: looking up ${w}: ${errorText(e)}`);
        }
      }
    };
    for (let i = 0; i < LOOKUPS; i++) void worker();
  }, [key]);
  return useMemo(() => {
    const classes: string[] = [];
    const nodes: string[] = [];
    for (const [w, found] of known.current) {
      if (found?.cls) classes.push(w);
      if (found?.node) nodes.push(w);
    }
    return { classes, nodes };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [version, key]);
}

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

const PENDING_HEAD = (
  <thead>
    <tr>
      <th scope="col">Namespace</th>
      <th scope="col">Pod</th>
      <th scope="col">Reason</th>
      <th scope="col">Explanation</th>
    </tr>
  </thead>
);

const PendingRow = memo(function PendingRow({
  p,
  index,
  classes,
  nodes,
}: {
  p: PendingPod;
  index: number;
  classes: string[];
  nodes: string[];
}) {
  return (
    <tr aria-rowindex={index + 2} data-pod={`${p.pod.metadata.namespace}/${p.pod.metadata.name}`}>
      <td>{p.pod.metadata.namespace}</td>
      <th scope="row">{p.pod.metadata.name}</th>
      <td>{p.reason}</td>
      <td>
        <Explained message={p.message} classes={classes} nodes={nodes} />
      </td>
    </tr>
  );
});

const pendingKey = (p: PendingPod) => `${p.pod.metadata.namespace}/${p.pod.metadata.name}`;

export function PendingPage() {
  // Only the pods without a node are listed and watched (fieldSelector=spec.nodeName=).
  const pods = useUnboundPods(paths.pods);
  const pending = useMemo(() => pendingPods(pods.items), [pods.items]);
  const words = useMemo(() => {
    const all = new Set<string>();
    for (const p of pending) for (const w of candidates(p.message)) all.add(w);
    return Array.from(all).sort();
  }, [pending]);
  const { classes, nodes } = useNamedObjects(words);
  return (
    <section aria-labelledby="pending-title">
      <h1 id="pending-title">Pending</h1>
      <p>Pods the scheduler could not place yet, with its explanation.</p>
      <LoadState loaded={pods.loaded} error={pods.error} />
      {pods.loaded && pending.length === 0 && <p>No pod is waiting.</p>}
      {pending.length > 0 && (
        <>
          <p className="muted" data-testid="pending-count">
            {pending.length} {pending.length === 1 ? 'pod waits' : 'pods wait'}
          </p>
          <VirtualTable
            aria-label="Pending pods"
            items={pending}
            itemKey={pendingKey}
            columns={4}
            estimate={50}
            head={PENDING_HEAD}
            renderItem={(p, i) => <PendingRow p={p} index={i} classes={classes} nodes={nodes} />}
          />
        </>
      )}
    </section>
  );
}
