import { ReactNode, memo, useEffect, useMemo, useRef, useState } from 'react';
import { Json, K8sObject, errorText, paths, request, withQuery } from '../api';
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

// The quota a scheduler message names: the claim a template or an extended resource would
// generate was refused by ResourceQuota admission ("resourceclaims.resource.k8s.io \"p-gpu-\" is
// forbidden: exceeded quota: gpus, requested: ..."), as Kubernetes' quota admission words it. The
// quota is in the pod's namespace.
const EXCEEDED_QUOTA = /exceeded quota: ([a-z0-9](?:[-a-z0-9.]*[a-z0-9])?)/;

// Where a quota is shown: the Quotas page highlights it (or the namespace's quotas).
function quotaPath(namespace: string, name?: string): string {
  return `/quotas/${encodeURIComponent(namespace)}${name ? `/${encodeURIComponent(name)}` : ''}`;
}

// The nodes a pod asks for by name: a kubernetes.io/hostname node selector, or required node
// affinity on metadata.name or kubernetes.io/hostname (In). The node that refuses such a pod is
// one of these, which the scheduler's counts ("1 node(s) had untolerated taint ...") do not name.
function pinnedNodes(pod: K8sObject): string[] {
  const out = new Set<string>();
  const host = pod.spec?.nodeSelector?.['kubernetes.io/hostname'];
  if (typeof host === 'string' && host) out.add(host);
  const terms =
    pod.spec?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms || [];
  for (const t of terms) {
    const requirements = [
      ...(t.matchFields || []).filter((r: Json) => r.key === 'metadata.name'),
      ...(t.matchExpressions || []).filter((r: Json) => r.key === 'kubernetes.io/hostname'),
    ];
    for (const r of requirements) {
      if (r.operator === 'In') for (const v of r.values || []) if (typeof v === 'string' && v) out.add(v);
    }
  }
  return Array.from(out).sort();
}

// Links the device classes and nodes in `text` to their pages.
function linkNames(text: string, names: { n: string; to: string }[], parts: ReactNode[]) {
  let rest = text;
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
      <Link key={parts.length} to={best.to}>
        {best.n}
      </Link>,
    );
    rest = rest.slice(best.at + best.n.length);
  }
}

// Links the device classes, nodes and quota a scheduler message names to their pages, and the
// nodes the pod is pinned to.
function Explained({
  message,
  namespace,
  pinned,
  classes,
  nodes,
}: {
  message: string;
  namespace: string;
  pinned: string[];
  classes: string[];
  nodes: string[];
}) {
  const names = [
    ...classes.map((n) => ({ n, to: `/device-classes/${encodeURIComponent(n)}` })),
    ...nodes.map((n) => ({ n, to: `/inventory/${encodeURIComponent(n)}` })),
  ].sort((a, b) => b.n.length - a.n.length);
  const parts: ReactNode[] = [];
  const quota = EXCEEDED_QUOTA.exec(message);
  if (quota) {
    const at = quota.index + quota[0].length - quota[1].length;
    linkNames(message.slice(0, at), names, parts);
    parts.push(
      <Link key={parts.length} to={quotaPath(namespace, quota[1])} label={`quota ${namespace}/${quota[1]}`}>
        {quota[1]}
      </Link>,
    );
    linkNames(message.slice(at + quota[1].length), names, parts);
  } else {
    linkNames(message, names, parts);
  }
  const known = new Set(nodes);
  const pinnedKnown = pinned.filter((n) => known.has(n));
  return (
    <>
      <span data-testid="pending-message">{parts}</span>
      {!quota && /quota/i.test(message) && (
        <>
          {' '}
          (<Link to={quotaPath(namespace)}>quotas of {namespace}</Link>)
        </>
      )}
      {pinnedKnown.length > 0 && (
        <span className="muted" data-testid="pinned-nodes">
          {' '}
          (asks for node{pinnedKnown.length > 1 ? 's' : ''}{' '}
          {pinnedKnown.map((n, i) => (
            <span key={n}>
              {i > 0 && ', '}
              <Link to={`/inventory/${encodeURIComponent(n)}`}>{n}</Link>
            </span>
          ))}
          )
        </span>
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
        <Explained
          message={p.message}
          namespace={p.pod.metadata.namespace || ''}
          pinned={pinnedNodes(p.pod)}
          classes={classes}
          nodes={nodes}
        />
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
    for (const p of pending) {
      for (const w of candidates(p.message)) all.add(w);
      for (const n of pinnedNodes(p.pod)) all.add(n);
    }
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
