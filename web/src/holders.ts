// Who holds which devices now, for the pools the drawn rows show: the server's DeviceHolderReview
// (admin.quartermaster.io/v1alpha1) asked for those pools only, and again for every pool in use
// when the ClusterSummary says a ResourceClaim changed. No ResourceClaim is listed or watched:
// Kubernetes has no field selector that finds the claims holding given devices, and reading every
// claim to show twenty nodes' holders was most of the Inventory's bytes at 5,000 claims.

import { useEffect, useMemo, useRef, useState, useSyncExternalStore } from 'react';
import { Json, K8sObject, errorText, paths, request, withQuery } from './api';
import { Holder, sameHolders } from './model';
import { compareKeys, Debounce, useKindChangesWhen } from './store';

export interface HeldDevice {
  driver: string;
  pool: string;
  device: string;
  holders: {
    claim: { namespace: string; name: string; uid: string };
    request: string;
    shareID?: string;
    consumedCapacity?: Record<string, string>;
    adminAccess?: boolean;
    consumers: { resource: string; name: string; uid?: string }[];
    claimCreationTimestamp?: string;
    nodeName?: string;
  }[];
}

// One review: the devices held now in `pools` ("driver/pool"; none: every held device).
export async function reviewHolders(pools: string[] | null): Promise<HeldDevice[]> {
  const spec: Json = {};
  if (pools) {
    spec.pools = pools.map((p) => {
      const slash = p.indexOf('/');
      return { driver: p.slice(0, slash), pool: p.slice(slash + 1) };
    });
  }
  const r = await request(paths.deviceHolderReviews, {
    method: 'POST',
    body: { apiVersion: 'admin.quartermaster.io/v1alpha1', kind: 'DeviceHolderReview', spec },
  });
  return (r?.status?.devices || []) as HeldDevice[];
}

// The holders as the device rows show them (admin access is not holding).
export function holdersOf(d: HeldDevice): Holder[] {
  return d.holders
    .filter((h) => !h.adminAccess)
    .map((h) => ({
      claim: `${h.claim.namespace}/${h.claim.name}`,
      request: h.request,
      shareId: h.shareID,
      consumedCapacity: h.consumedCapacity,
      pods: h.consumers.filter((c) => !c.resource || c.resource === 'pods').map((c) => c.name),
      claimCreated: h.claimCreationTimestamp,
      node: h.nodeName,
    }));
}

const MAX_POOLS = 1000; // per review (the server's limit)

export interface HoldersState {
  // driver/pool/device -> the claims holding it now, for the pools asked for so far.
  allocations: Map<string, Holder[]>;
  // The pools whose holders have arrived.
  known: ReadonlySet<string>;
  error: string;
}

class HolderStore {
  private readonly wanted = new Map<string, number>(); // pool -> rows that show it
  private readonly pools = new Map<string, Map<string, Holder[]>>(); // pool -> device -> holders
  private readonly missing = new Set<string>(); // wanted, not yet asked for
  private readonly listeners = new Set<() => void>();
  private state: HoldersState = { allocations: new Map(), known: new Set(), error: '' };
  private readonly asker = new Debounce(30);
  private refreshAll = false;
  private busy = false;
  private generation = 0;

  subscribe = (l: () => void) => {
    this.listeners.add(l);
    return () => this.listeners.delete(l);
  };

  snapshot = () => this.state;

  want(pools: string[]): () => void {
    for (const p of pools) {
      const n = this.wanted.get(p) || 0;
      this.wanted.set(p, n + 1);
      if (n === 0 && !this.pools.has(p)) this.missing.add(p);
    }
    if (this.missing.size) this.asker.schedule(() => void this.ask());
    return () => {
      for (const p of pools) {
        const n = (this.wanted.get(p) || 1) - 1;
        if (n > 0) {
          this.wanted.set(p, n);
        } else {
          // Forgotten: a later row asks again (its holders may have changed meanwhile).
          this.wanted.delete(p);
          this.missing.delete(p);
          this.pools.delete(p);
        }
      }
    };
  }

  // Claims changed: every pool in use is asked for again.
  claimsChanged(): void {
    this.refreshAll = true;
    this.asker.schedule(() => void this.ask());
  }

  reset(): void {
    this.generation++;
    this.busy = false;
    this.refreshAll = false;
    this.wanted.clear();
    this.pools.clear();
    this.missing.clear();
    this.state = { allocations: new Map(), known: new Set(), error: '' };
  }

  // One review at a time: what changed while one was out is asked for right after it.
  private async ask(): Promise<void> {
    if (this.busy) return;
    const asked = this.refreshAll ? [...this.wanted.keys()] : [...this.missing];
    this.refreshAll = false;
    this.missing.clear();
    if (asked.length === 0) return;
    this.busy = true;
    const generation = this.generation;
    try {
      for (let i = 0; i < asked.length; i += MAX_POOLS) {
        const chunk = asked.slice(i, i + MAX_POOLS);
        const devices = await reviewHolders(chunk);
        if (generation !== this.generation) return;
        const fresh = new Map<string, Map<string, Holder[]>>();
        for (const p of chunk) fresh.set(p, new Map());
        for (const d of devices) {
          const pool = `${d.driver}/${d.pool}`;
          const id = `${pool}/${d.device}`;
          const holders = holdersOf(d);
          if (holders.length === 0) continue;
          const before = this.pools.get(pool)?.get(id);
          fresh.get(pool)?.set(id, before && sameHolders(before, holders) ? before : holders);
        }
        for (const [p, m] of fresh) if (this.wanted.has(p)) this.pools.set(p, m);
      }
      this.publish('');
    } catch (e) {
      if (generation !== this.generation) return;
      for (const p of asked) if (this.wanted.has(p) && !this.pools.has(p)) this.missing.add(p);
      this.publish(errorText(e));
    } finally {
      if (generation === this.generation) this.busy = false;
      if (this.refreshAll || this.missing.size) this.asker.schedule(() => void this.ask());
    }
  }

  private publish(error: string): void {
    const allocations = new Map<string, Holder[]>();
    for (const m of this.pools.values()) for (const [id, h] of m) allocations.set(id, h);
    this.state = { allocations, known: new Set(this.pools.keys()), error };
    for (const l of this.listeners) l();
  }
}

const store = new HolderStore();

// The holders of the pools of the rows drawn now (a page calls this once); a claim change (the
// ClusterSummary, followed once `enabled`: after the page's first screen) asks for every pool in
// use again.
export function useHolders(enabled: boolean): HoldersState {
  const changes = useKindChangesWhen(enabled, 'resourceclaims');
  useEffect(() => {
    if (changes > 0) store.claimsChanged();
  }, [changes]);
  return useSyncExternalStore(store.subscribe, store.snapshot);
}

// Asks for the holders of the pools of `devices` while the calling row is drawn; how many of
// them are held (-1 until every pool's holders have arrived).
export function useHeldCount(devices: { id: string; driver: string; pool: string }[]): number {
  const pools = useMemo(() => [...new Set(devices.map((d) => `${d.driver}/${d.pool}`))].sort(), [devices]);
  const key = pools.join('\n');
  useEffect(() => (pools.length ? store.want(pools) : undefined), [key]); // eslint-disable-line
  return useSyncExternalStore(store.subscribe, () => {
    const s = store.snapshot();
    if (!pools.every((p) => s.known.has(p))) return -1;
    let n = 0;
    for (const d of devices) if (s.allocations.has(d.id)) n++;
    return n;
  });
}

// Sign-out.
export function resetHolders(): void {
  store.reset();
}

export interface AllHoldersState {
  allocations: Map<string, Holder[]>; // every held device -> its holders
  loaded: boolean;
  error: string;
}

// Every device held now (one DeviceHolderReview without pools: its size is the held devices, not
// the claims), asked again when the ClusterSummary says a claim changed, while `enabled`. A
// device whose holders did not change keeps the same array (its memoized row does not re-render).
export function useAllHolders(enabled: boolean): AllHoldersState {
  const changes = useKindChangesWhen(enabled, 'resourceclaims');
  const [state, setState] = useState<AllHoldersState>({ allocations: new Map(), loaded: false, error: '' });
  const asked = useRef(0);
  const applied = useRef(0); // answers apply in the order asked; none after the page is left
  const mounted = useRef(true);
  useEffect(() => {
    mounted.current = true;
    return () => {
      mounted.current = false;
    };
  }, []);
  useEffect(() => {
    if (!enabled) return;
    const n = ++asked.current;
    reviewHolders(null)
      .then((devices) => {
        if (!mounted.current || n <= applied.current) return;
        applied.current = n;
        setState((s) => {
          const allocations = new Map<string, Holder[]>();
          for (const d of devices) {
            const id = `${d.driver}/${d.pool}/${d.device}`;
            const holders = holdersOf(d);
            if (holders.length === 0) continue;
            const before = s.allocations.get(id);
            allocations.set(id, before && sameHolders(before, holders) ? before : holders);
          }
          return { allocations, loaded: true, error: '' };
        });
      })
      .catch((e) => mounted.current && n > applied.current && setState((s) => ({ ...s, loaded: true, error: errorText(e) })));
  }, [enabled, changes]);
  return state;
}

export interface ClassClaim {
  namespace: string;
  name: string;
  uid: string;
  allocated: boolean;
}

export interface ClassClaimsState {
  claims: ClassClaim[]; // the first `limit`, by namespace and name
  count: number; // every claim naming the class
  complete: boolean; // an answer has arrived (or failed: error)
  error: string;
}

const NO_CLASS_CLAIMS: ClassClaimsState = { claims: [], count: 0, complete: false, error: '' };

// The first `limit` claims that name device class `name`, allocated or not, and how many do (a
// DeviceHolderReview with spec.deviceClassName and spec.limit, answered from the server's index:
// no ResourceClaim is read), asked while `enabled` and again when the ClusterSummary says a claim
// changed.
export function useClassClaims(name: string, enabled: boolean, limit: number): ClassClaimsState {
  const changes = useKindChangesWhen(enabled, 'resourceclaims');
  const [state, setState] = useState<ClassClaimsState>(NO_CLASS_CLAIMS);
  const asked = useRef(0);
  useEffect(() => {
    if (!enabled || !name) {
      asked.current++;
      setState(NO_CLASS_CLAIMS);
      return;
    }
    const n = ++asked.current;
    request(paths.deviceHolderReviews, {
      method: 'POST',
      body: {
        apiVersion: 'admin.quartermaster.io/v1alpha1',
        kind: 'DeviceHolderReview',
        spec: { deviceClassName: name, limit },
      },
    })
      .then((r) => {
        if (n !== asked.current) return;
        const claims = (r?.status?.claims || []) as ClassClaim[];
        setState({ claims, count: r?.status?.claimCount ?? claims.length, complete: true, error: '' });
      })
      .catch((e) => n === asked.current && setState((s) => ({ ...s, complete: s.complete, error: errorText(e) })));
  }, [name, enabled, limit, changes]);
  useEffect(
    () => () => {
      asked.current++; // no answer applies after the page is left
    },
    [],
  );
  return state;
}

export interface HoldingClaimsState {
  claims: K8sObject[]; // by namespace and name
  loaded: boolean; // the first answer arrived (or failed: error)
  error: string;
}

const CLAIM_GETS = 8; // claims read at a time
const NO_HOLDING: HoldingClaimsState = { claims: [], loaded: false, error: '' };

// The ResourceClaims holding a device of `pools` ("driver/pool") that `wanted` accepts (null
// pools: not known yet, nothing is asked): a DeviceHolderReview for those pools names the claims
// (admin access included), then each claim is read by name on its own (its every device, not only
// those in the pools). Asked again when the ClusterSummary says a claim changed, while
// `enabled`; a claim is read again only when what the review says of it changed (its uid, its
// holds or its consumers: an allocation's results do not change while it lasts), so a change
// elsewhere costs one review. No ResourceClaim is listed. `key` names `wanted` (a new key asks
// again).
export function useClaimsHolding(
  pools: string[] | null,
  wanted: (deviceId: string) => boolean,
  key: string,
  enabled: boolean,
): HoldingClaimsState {
  const changes = useKindChangesWhen(enabled, 'resourceclaims');
  // (`of`: the pools and key the answer is for; another's is never shown)
  const [state, setState] = useState<HoldingClaimsState & { of: string }>({ ...NO_HOLDING, of: '' });
  const asked = useRef(0);
  const applied = useRef(0);
  // namespace/name -> the review's view of it when it was read, and the claim read then.
  const known = useRef(new Map<string, { signature: string; claim: K8sObject }>());
  const wantedRef = useRef(wanted);
  wantedRef.current = wanted;
  const poolsKey = pools ? pools.join('\n') : null;
  const of = `${poolsKey}\n${key}`;
  useEffect(() => {
    if (!enabled || poolsKey === null) {
      applied.current = ++asked.current;
      known.current = new Map();
      setState({ ...NO_HOLDING, of: '' });
      return;
    }
    const n = ++asked.current;
    void (async () => {
      try {
        const devices = poolsKey ? await reviewHolders(poolsKey.split('\n').slice(0, MAX_POOLS)) : [];
        const holding = new Map<string, { namespace: string; name: string; parts: Json[] }>();
        for (const d of devices) {
          if (!wantedRef.current(`${d.driver}/${d.pool}/${d.device}`)) continue;
          for (const h of d.holders) {
            const k = `${h.claim.namespace}/${h.claim.name}`;
            const entry = holding.get(k) || { namespace: h.claim.namespace, name: h.claim.name, parts: [] };
            entry.parts.push([h.claim.uid, d.driver, d.pool, d.device, h.request, h.shareID || '', h.consumers]);
            holding.set(k, entry);
          }
        }
        const before = known.current;
        const next = new Map<string, { signature: string; claim: K8sObject }>();
        const toRead: { k: string; namespace: string; name: string; signature: string }[] = [];
        for (const [k, e] of holding) {
          const signature = JSON.stringify(e.parts);
          const old = before.get(k);
          if (old && old.signature === signature) next.set(k, old);
          else toRead.push({ k, namespace: e.namespace, name: e.name, signature });
        }
        let i = 0;
        const worker = async () => {
          while (i < toRead.length) {
            const r = toRead[i++];
            // The claim by name (a list with fieldSelector=metadata.name, as kubectl reads one
            // object it watches): one that is gone since the review is an empty list, not a 404.
            const list = await request(
              withQuery(paths.namespacedClaims(r.namespace), { fieldSelector: `metadata.name=${r.name}` }),
            );
            const claim = (list?.items || [])[0] as K8sObject | undefined;
            if (claim) next.set(r.k, { signature: r.signature, claim });
          }
        };
        await Promise.all(Array.from({ length: Math.min(CLAIM_GETS, toRead.length) }, worker));
        if (n <= applied.current) return; // a later answer applied already
        applied.current = n;
        known.current = next;
        const claims = [...next.keys()].sort(compareKeys).map((k) => next.get(k)!.claim);
        setState({ claims, loaded: true, error: '', of });
      } catch (e) {
        if (n <= applied.current) return;
        setState((s) => (s.of === of ? { ...s, error: errorText(e) } : { ...NO_HOLDING, loaded: true, error: errorText(e), of }));
      }
    })();
  }, [enabled, poolsKey, key, changes]); // eslint-disable-line
  useEffect(
    () => () => {
      applied.current = ++asked.current; // no answer applies after the page is left
    },
    [],
  );
  return enabled && state.of === of ? state : NO_HOLDING;
}
