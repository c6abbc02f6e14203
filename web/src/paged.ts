// Collections too large to list whole at scale (5,000 nodes, their ResourceSlices):
//
// - PagedCollection loads a kind page by page (limit/continue) only as far as the page asks
//   (loadMore as the table scrolls near its end, or every page while a filter needs them) and
//   watches it from the first page's resourceVersion; events apply to the loaded key range only
//   (a later page brings the rest as it is then).
// - Partitioned loads the objects of one field value (ResourceSlices by spec.nodeName) when a row
//   first asks for them (fieldSelector, a few requests at a time) and keeps the partitions asked
//   for live through one watch of the whole kind; other partitions' events only bump a change
//   counter.
//
// (The Overview's node counts are the server's: the ClusterSummary, store.ts' useClusterSummary.)
//
// The Pending page and the Overview need the pods whose spec.nodeName is empty (unbound) only:
// they list and watch fieldSelector=spec.nodeName= alone (useUnboundPods, a filtered
// useCollection): the server's selector watch sends DELETED when a pod stops matching (the
// scheduler binds it) and ADDED when one starts to, as Kubernetes' watch cache does, so no
// event of a bound pod reaches the page.
//
// Both keep objects in keyed maps and publish per key range or partition: an event re-publishes
// the one partition it touches (and unchanged objects keep their identity), so memoized rows of
// other nodes do not re-render. Stale answers never overwrite newer objects: resourceVersions
// are compared (this server's are integers) and deletions leave a tombstone.

import { useCallback, useEffect, useMemo, useRef, useSyncExternalStore } from 'react';
import {
  ApiError,
  K8sObject,
  currentRevision,
  errorText,
  listAll,
  objectKey,
  request,
  watch,
  withQuery,
} from './api';
import { compareKeys, Debounce, PUBLISH_DELAY_MS, useCollection } from './store';

const IDLE_STOP_MS = 1_500;
export const FIRST_PAGE = 100;
export const PAGE = 500;
// Pages while every page is wanted (a filter, or a view that needs the whole kind): each request
// costs the browser more than the server's work for a larger page.
const PAGE_ALL = 2000;
const PARTITION_FETCHES = 4;

function rvOf(o: K8sObject | undefined): number {
  const n = Number(o?.metadata?.resourceVersion);
  return Number.isFinite(n) ? n : 0;
}

// Whether `o` may replace `old` (it is not older).
function newer(o: K8sObject, old: K8sObject | undefined): boolean {
  return !old || rvOf(o) >= rvOf(old);
}

export interface PagedState {
  items: K8sObject[]; // the loaded objects, in key order
  loaded: boolean; // the first page arrived
  complete: boolean; // every page arrived
  loading: boolean; // a page is on its way
  error: string;
  version: number;
}

interface Event {
  type: string;
  object: K8sObject;
}

class PagedCollection {
  private readonly path: string;
  private readonly objects = new Map<string, K8sObject>();
  private readonly tombstones = new Map<string, number>();
  private keys: string[] = [];
  private membershipChanged = false;
  private frontier = ''; // the last key loaded ('' before the first page)
  private cont = '';
  private complete = false;
  private loading = false;
  // Events beyond the frontier that arrived while a page was on its way (it may predate them).
  private held: Event[] = [];
  private all = 0; // callers that want every page (a filter is set)
  private readonly listeners = new Set<() => void>();
  private state: PagedState = {
    items: [],
    loaded: false,
    complete: false,
    loading: false,
    error: '',
    version: 0,
  };
  private abort: AbortController | null = null;
  private readonly publisher = new Debounce(PUBLISH_DELAY_MS);
  private stopTimer: number | undefined;

  constructor(path: string) {
    this.path = path;
  }

  subscribe = (listener: () => void): (() => void) => {
    this.listeners.add(listener);
    window.clearTimeout(this.stopTimer);
    if (!this.abort) void this.start();
    return () => {
      this.listeners.delete(listener);
      if (this.listeners.size === 0) {
        this.stopTimer = window.setTimeout(() => this.stop(), IDLE_STOP_MS);
      }
    };
  };

  snapshot = (): PagedState => this.state;

  // Loads the next page (no-op while one is on its way or when all are loaded).
  loadMore = (): void => {
    if (!this.abort || this.loading || this.complete || !this.state.loaded) return;
    void this.nextPage(this.abort.signal).catch((e) => this.fail(e, this.abort?.signal));
  };

  // While at least one caller wants them, every page is loaded.
  wantAll = (): (() => void) => {
    this.all++;
    this.loadMore();
    return () => {
      this.all--;
    };
  };

  stop(): void {
    this.abort?.abort();
    this.abort = null;
    this.loading = false;
    this.publisher.cancel();
    // A page that shows the kind again later renders once before it subscribes: it must not see
    // the objects of this run as a current, complete list (they stopped being watched).
    this.state = { ...NOT_ASKED, version: this.state.version + 1 };
  }

  private publish(now = false): void {
    const run = () => {
      if (this.membershipChanged) {
        this.keys = Array.from(this.objects.keys()).sort(compareKeys);
        this.membershipChanged = false;
      }
      this.state = {
        items: this.keys.map((k) => this.objects.get(k)!),
        loaded: this.state.loaded,
        complete: this.complete,
        loading: this.loading,
        error: this.state.error,
        version: this.state.version + 1,
      };
      for (const l of this.listeners) l();
    };
    this.publisher.schedule(run, now);
  }

  private fail(e: unknown, signal?: AbortSignal): void {
    if (!signal || signal.aborted) return;
    if (e instanceof ApiError && e.code === 401) return;
    this.loading = false;
    this.state = { ...this.state, error: errorText(e) };
    this.publish(true);
  }

  // Applies an event to the loaded range; returns whether anything changed.
  private apply(e: Event): boolean {
    const o = e.object;
    const key = objectKey(o);
    if (!this.complete && compareKeys(key, this.frontier) > 0) {
      if (this.loading) this.held.push(e);
      return false;
    }
    const old = this.objects.get(key);
    if (e.type === 'DELETED') {
      if (!old || !newer(o, old)) return false;
      this.objects.delete(key);
      this.tombstones.set(key, rvOf(o));
      this.membershipChanged = true;
      return true;
    }
    if (!newer(o, old) || (this.tombstones.get(key) ?? -1) >= rvOf(o)) return false;
    if (!old) this.membershipChanged = true;
    this.objects.set(key, o);
    return true;
  }

  private async nextPage(signal: AbortSignal): Promise<string> {
    this.loading = true;
    if (this.state.loaded) this.publish(true);
    const limit = !this.state.loaded ? FIRST_PAGE : this.all > 0 ? PAGE_ALL : PAGE;
    const page = await request(withQuery(this.path, { limit: String(limit), continue: this.cont || undefined }), {
      signal,
    });
    if (signal.aborted) return '';
    const items: K8sObject[] = page.items || [];
    for (const o of items) {
      const key = objectKey(o);
      if ((this.tombstones.get(key) ?? -1) >= rvOf(o)) continue;
      if (!newer(o, this.objects.get(key))) continue;
      if (!this.objects.has(key)) this.membershipChanged = true;
      this.objects.set(key, o);
    }
    if (items.length) this.frontier = objectKey(items[items.length - 1]);
    this.cont = page.metadata?.continue || '';
    this.complete = !this.cont;
    this.loading = false;
    const held = this.held;
    this.held = [];
    for (const e of held) this.apply(e);
    this.state = { ...this.state, loaded: true, error: '' };
    this.publish(true);
    if (this.all > 0 && !this.complete) {
      // The next one after the browser has drawn this one.
      window.setTimeout(() => this.loadMore(), 0);
    }
    return page.metadata?.resourceVersion || '';
  }

  private async start(): Promise<void> {
    const abort = new AbortController();
    this.abort = abort;
    let backoff = 500;
    while (!abort.signal.aborted) {
      try {
        this.objects.clear();
        this.tombstones.clear();
        this.held = [];
        this.frontier = '';
        this.cont = '';
        this.complete = false;
        this.loading = false;
        this.membershipChanged = true;
        // Nothing of an earlier start is shown as current (a page left and opened again later
        // would otherwise see the old objects as a complete list until the first page arrives).
        this.state = { ...NOT_ASKED, version: this.state.version + 1 };
        let rv = await this.nextPage(abort.signal);
        let relist = false;
        while (!abort.signal.aborted && !relist) {
          await watch(
            this.path,
            rv,
            (e) => {
              if (e.type === 'ERROR') {
                relist = true; // 410 Gone: start over from the first page
                return;
              }
              const o = e.object as K8sObject;
              if (o?.metadata?.resourceVersion) rv = o.metadata.resourceVersion;
              if (e.type === 'BOOKMARK') return;
              if (this.apply(e as Event)) this.publish();
            },
            abort.signal,
          );
          backoff = 500;
        }
      } catch (e) {
        if (abort.signal.aborted) return;
        if (e instanceof ApiError && e.code === 401) return;
        this.fail(e, abort.signal);
        await new Promise((r) => setTimeout(r, backoff));
        backoff = Math.min(backoff * 2, 10_000);
      }
    }
  }
}

// --- Partitions: the objects of one field value, loaded when asked for -------------------------

export interface PartitionState {
  items: K8sObject[]; // in key order
  loaded: boolean;
}

interface Partition {
  objects: Map<string, K8sObject>;
  state: PartitionState;
  listeners: Set<() => void>;
  dirty: boolean;
  fetching: boolean;
}

const EMPTY: PartitionState = { items: [], loaded: false };

class Partitioned {
  private readonly path: string;
  private readonly field: string;
  private readonly partOf: (o: K8sObject) => string;
  private readonly parts = new Map<string, Partition>();
  private readonly partOfKey = new Map<string, string>();
  private readonly tombstones = new Map<string, number>();
  private readonly changeListeners = new Set<() => void>();
  private changes = 0;
  private abort: AbortController | null = null;
  private ready: Promise<void> | null = null;
  private queue: string[] = [];
  private active = 0;
  private readonly publisher = new Debounce(PUBLISH_DELAY_MS);
  private stopTimer: number | undefined;
  private users = 0;

  constructor(path: string, field: string, partOf: (o: K8sObject) => string) {
    this.path = path;
    this.field = field;
    this.partOf = partOf;
  }

  private use(): () => void {
    this.users++;
    window.clearTimeout(this.stopTimer);
    if (!this.abort) this.start();
    return () => {
      this.users--;
      if (this.users === 0) this.stopTimer = window.setTimeout(() => this.stop(), IDLE_STOP_MS);
    };
  }

  private part(name: string): Partition {
    let p = this.parts.get(name);
    if (!p) {
      p = { objects: new Map(), state: EMPTY, listeners: new Set(), dirty: false, fetching: false };
      this.parts.set(name, p);
      this.enqueue(name);
    }
    return p;
  }

  subscribePart(name: string, listener: () => void): () => void {
    const release = this.use();
    const p = this.part(name);
    p.listeners.add(listener);
    return () => {
      p.listeners.delete(listener);
      release();
    };
  }

  snapshotPart(name: string): PartitionState {
    return this.parts.get(name)?.state ?? EMPTY;
  }

  subscribeChanges = (listener: () => void): (() => void) => {
    const release = this.use();
    this.changeListeners.add(listener);
    return () => {
      this.changeListeners.delete(listener);
      release();
    };
  };

  snapshotChanges = (): number => this.changes;

  stop(): void {
    this.abort?.abort();
    this.abort = null;
    this.ready = null;
    this.parts.clear();
    this.partOfKey.clear();
    this.tombstones.clear();
    this.queue = [];
    this.publisher.cancel();
  }

  private enqueue(name: string): void {
    this.queue.push(name);
    this.pump();
  }

  private pump(): void {
    while (this.active < PARTITION_FETCHES && this.queue.length && this.abort) {
      const name = this.queue.shift()!;
      const p = this.parts.get(name);
      if (!p || p.fetching) continue;
      this.active++;
      p.fetching = true;
      void this.fetch(name, p).finally(() => {
        p.fetching = false;
        this.active--;
        this.pump();
      });
    }
  }

  private async fetch(name: string, p: Partition): Promise<void> {
    const abort = this.abort;
    if (!abort || !this.ready) return;
    try {
      await this.ready;
      // Not aborted on stop (a short request; its answer is dropped then).
      const list = await listAll(withQuery(this.path, { fieldSelector: `${this.field}=${name}` }));
      if (abort.signal.aborted || this.parts.get(name) !== p) return;
      const listRv = Number(list.resourceVersion) || 0;
      const seen = new Set<string>();
      for (const o of list.items) {
        const key = objectKey(o);
        seen.add(key);
        if ((this.tombstones.get(key) ?? -1) >= rvOf(o)) continue;
        if (!newer(o, p.objects.get(key))) continue;
        p.objects.set(key, o);
        this.partOfKey.set(key, name);
      }
      // Gone since (a relist after the watch expired): dropped unless changed after the list.
      for (const [key, o] of p.objects) {
        if (!seen.has(key) && rvOf(o) <= listRv) {
          p.objects.delete(key);
          this.partOfKey.delete(key);
        }
      }
      p.dirty = true;
      p.state = { ...p.state, loaded: true };
      this.publish(true);
    } catch (e) {
      if (abort.signal.aborted) return;
      if (e instanceof ApiError && e.code === 401) return;
      console.warn(`${this.path} ${this.field}=${name}: ${errorText(e)}`);
      window.setTimeout(() => this.abort === abort && this.enqueue(name), 2_000);
    }
  }

  private publish(now = false): void {
    const run = () => {
      for (const p of this.parts.values()) {
        if (!p.dirty) continue;
        p.dirty = false;
        const items = Array.from(p.objects.values()).sort((a, b) =>
          compareKeys(objectKey(a), objectKey(b)),
        );
        p.state = { items, loaded: p.state.loaded };
        for (const l of p.listeners) l();
      }
      for (const l of this.changeListeners) l();
    };
    this.publisher.schedule(run, now);
  }

  private applyEvent(type: string, o: K8sObject): void {
    const key = objectKey(o);
    const from = this.partOfKey.get(key);
    const to = this.partOf(o);
    this.changes++;
    if (type === 'DELETED') {
      this.tombstones.set(key, rvOf(o));
      if (from === undefined) return;
      const p = this.parts.get(from)!;
      if (!newer(o, p.objects.get(key))) return;
      p.objects.delete(key);
      this.partOfKey.delete(key);
      p.dirty = true;
      return;
    }
    const target = this.parts.get(to);
    if (from !== undefined && from !== to) {
      const p = this.parts.get(from)!;
      p.objects.delete(key);
      this.partOfKey.delete(key);
      p.dirty = true;
    }
    if (!target) return; // nobody asked for this partition
    if (!newer(o, target.objects.get(key))) return;
    target.objects.set(key, o);
    this.partOfKey.set(key, to);
    target.dirty = true;
  }

  private start(): void {
    const abort = new AbortController();
    this.abort = abort;
    let resolve: () => void = () => {};
    this.ready = new Promise<void>((r) => (resolve = r));
    void (async () => {
      let backoff = 500;
      let rv = '';
      while (!abort.signal.aborted) {
        try {
          // The watch starts before any partition is listed, so no change falls between them.
          if (!rv) {
            rv = await currentRevision(this.path, abort.signal);
            resolve();
          }
          let relist = false;
          await watch(
            this.path,
            rv,
            (e) => {
              if (e.type === 'ERROR') {
                relist = true;
                return;
              }
              const o = e.object as K8sObject;
              if (o?.metadata?.resourceVersion) rv = o.metadata.resourceVersion;
              if (e.type === 'BOOKMARK') return;
              this.applyEvent(e.type, o);
              this.publish();
            },
            abort.signal,
          );
          if (relist) {
            // Too old to resume: watch from now and list every partition again.
            rv = await currentRevision(this.path, abort.signal);
            for (const name of this.parts.keys()) this.enqueue(name);
          }
          backoff = 500;
        } catch (e) {
          if (abort.signal.aborted) return;
          if (e instanceof ApiError && e.code === 401) return;
          console.warn(`${this.path} watch: ${errorText(e)}`);
          await new Promise((r) => setTimeout(r, backoff));
          backoff = Math.min(backoff * 2, 10_000);
        }
      }
    })();
    this.pump();
  }
}

const pagedCollections = new Map<string, PagedCollection>();
const partitioned = new Map<string, Partitioned>();

function paged(path: string): PagedCollection {
  let c = pagedCollections.get(path);
  if (!c) {
    c = new PagedCollection(path);
    pagedCollections.set(path, c);
  }
  return c;
}

export interface PagedCollectionView extends PagedState {
  loadMore: () => void;
  wantAll: () => () => void;
}

// The kind at `path`, loaded page by page as far as `loadMore` asks (and kept live).
export function usePagedCollection(path: string): PagedCollectionView {
  const c = paged(path);
  const state = useSyncExternalStore(c.subscribe, c.snapshot);
  return { ...state, loadMore: c.loadMore, wantAll: c.wantAll };
}

const NOT_ASKED: PagedState = { items: [], loaded: false, complete: false, loading: false, error: '', version: 0 };
const NO_MORE = () => {};
const NO_ALL = () => () => {};

// usePagedCollection while `enabled` (read and watched only then); an empty view else.
export function usePagedCollectionWhen(path: string, enabled: boolean): PagedCollectionView {
  const c = paged(path);
  const state = useSyncExternalStore(
    enabled ? c.subscribe : NO_SUBSCRIPTION,
    enabled ? c.snapshot : NOT_ASKED_SNAPSHOT,
  );
  return enabled
    ? { ...state, loadMore: c.loadMore, wantAll: c.wantAll }
    : { ...state, loadMore: NO_MORE, wantAll: NO_ALL };
}
const NO_SUBSCRIPTION = () => () => {};
const NOT_ASKED_SNAPSHOT = () => NOT_ASKED;

// The kind at `path`, every page of it (loaded page by page, 2,000 at a time after the first, and
// kept live), while `enabled`; an empty state else (nothing is asked for).
export function useWholePagedCollectionWhen(path: string, enabled: boolean): PagedState {
  const c = paged(path);
  const state = useSyncExternalStore(
    enabled ? c.subscribe : NO_SUBSCRIPTION,
    enabled ? c.snapshot : NOT_ASKED_SNAPSHOT,
  );
  useEffect(() => (enabled ? c.wantAll() : undefined), [c, enabled]);
  return state;
}

// A value derived from the loaded objects (`select` must return the same value while what it
// reads is unchanged): the component re-renders only when that value changes.
export function usePagedSelect<T>(path: string, select: (s: PagedState) => T): T {
  const c = paged(path);
  return useSyncExternalStore(c.subscribe, () => select(c.snapshot()));
}

function partitionsOf(path: string, field: string, partOf: (o: K8sObject) => string): Partitioned {
  const key = `${path}|${field}`;
  let p = partitioned.get(key);
  if (!p) {
    p = new Partitioned(path, field, partOf);
    partitioned.set(key, p);
  }
  return p;
}

const nodeSlices = (path: string) =>
  partitionsOf(path, 'spec.nodeName', (o) => o.spec?.nodeName || '');

// The ResourceSlices whose spec.nodeName is `node` ('' for those not bound to one node), live.
export function useNodeSlices(path: string, node: string): PartitionState {
  const p = nodeSlices(path);
  const subscribe = useCallback((l: () => void) => p.subscribePart(node, l), [p, node]);
  const snapshot = useCallback(() => p.snapshotPart(node), [p, node]);
  return useSyncExternalStore(subscribe, snapshot);
}

// A number that changes (at most every 100 ms) whenever any ResourceSlice changes.
export function useNodeSliceChanges(path: string): number {
  const p = nodeSlices(path);
  return useSyncExternalStore(p.subscribeChanges, p.snapshotChanges);
}

// The ResourceSlices of several nodes together (Assignments: the nodes its drawn rows name), live;
// `loaded` once every one of them arrived. The value keeps its identity while no part changes.
export function useNodeSlicesOf(path: string, nodes: string[]): PartitionState {
  const p = nodeSlices(path);
  const key = nodes.join('\n');
  const cache = useRef<{ states: PartitionState[]; value: PartitionState } | null>(null);
  const subscribe = useCallback(
    (l: () => void) => {
      const offs = key ? key.split('\n').map((n) => p.subscribePart(n, l)) : [];
      return () => offs.forEach((off) => off());
    },
    [p, key],
  );
  const snapshot = useCallback(() => {
    const states = key ? key.split('\n').map((n) => p.snapshotPart(n)) : [];
    const c = cache.current;
    if (c && c.states.length === states.length && c.states.every((s, i) => s === states[i])) {
      return c.value;
    }
    const value = { items: states.flatMap((s) => s.items), loaded: states.every((s) => s.loaded) };
    cache.current = { states, value };
    return value;
  }, [p, key]);
  return useSyncExternalStore(subscribe, snapshot);
}

// The pods not bound to a node yet (spec.nodeName empty: pending or not yet scheduled), live:
// listed and watched with fieldSelector=spec.nodeName=, so a pod leaves when the scheduler binds
// it (the watch's DELETED) and no other pod is fetched.
export function useUnboundPods(path: string): PartitionState & { error: string } {
  const c = useCollection(unboundPath(path));
  return useMemo(() => ({ items: c.items, loaded: c.loaded, error: c.error }), [c.items, c.loaded, c.error]);
}

export const unboundPath = (path: string) => withQuery(path, { fieldSelector: 'spec.nodeName=' });

// Stops and forgets everything (sign-out).
export function resetPaged(): void {
  for (const c of pagedCollections.values()) c.stop();
  pagedCollections.clear();
  for (const p of partitioned.values()) p.stop();
  partitioned.clear();
}
