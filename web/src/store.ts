// Live collections: one list + watch per API path, shared by every component that shows it.
// Events are applied to a map and published at most every 100 ms, so a burst of changes
// re-renders once; no polling. A watch the server ends is resumed from the last resourceVersion;
// 410 Gone (too old) lists again. The first list is published page by page (500 objects each,
// `complete` false until the last), so a page shows its first rows before a 5,000-node list has
// arrived. A change signal (useChanges) watches a kind without listing it, for pages that only
// need to know that something changed (the server-side counts are then asked for again).

import { useEffect, useRef, useState, useSyncExternalStore } from 'react';
import {
  ApiError,
  K8sObject,
  errorText,
  currentRevision,
  listAll,
  objectKey,
  paths,
  request,
  watch,
} from './api';

export interface CollectionState {
  items: K8sObject[];
  loaded: boolean;
  // False while the first list is still arriving page by page (items holds the pages so far).
  complete: boolean;
  error: string;
  // Bumped on every published change (for effects that recompute from a collection).
  version: number;
}

// Changes are published at most this often (a burst of watch events re-renders once).
export const PUBLISH_DELAY_MS = 100;

// Runs a function now, or once `delayMs` after the first of several requests that can wait.
export class Debounce {
  private timer: number | undefined;

  constructor(private readonly delayMs: number) {}

  schedule(run: () => void, now = false): void {
    if (now) {
      this.cancel();
      run();
    } else if (this.timer === undefined) {
      this.timer = window.setTimeout(() => {
        this.timer = undefined;
        run();
      }, this.delayMs);
    }
  }

  cancel(): void {
    window.clearTimeout(this.timer);
    this.timer = undefined;
  }
}
// Browsers open at most 6 HTTP/1.1 connections to one server and every watch holds one, so a
// collection nobody shows stops soon (the short delay survives a remount, not a page change).
const IDLE_STOP_MS = 1_500;

class Collection {
  private readonly path: string;
  private readonly objects = new Map<string, K8sObject>();
  // The keys in order, rebuilt only when an object is added or deleted (a change keeps it).
  private keys: string[] = [];
  private membershipChanged = false;
  private readonly listeners = new Set<() => void>();
  private state: CollectionState = {
    items: [],
    loaded: false,
    complete: false,
    error: '',
    version: 0,
  };
  private abort: AbortController | null = null;
  private readonly publisher = new Debounce(PUBLISH_DELAY_MS);
  private stopTimer: number | undefined;
  // Only count changes: no list, no objects kept (useChanges).
  private readonly signalOnly: boolean;

  constructor(path: string, signalOnly = false) {
    this.path = path;
    this.signalOnly = signalOnly;
  }

  subscribe = (listener: () => void): (() => void) => {
    this.listeners.add(listener);
    window.clearTimeout(this.stopTimer);
    if (!this.abort) this.start();
    return () => {
      this.listeners.delete(listener);
      if (this.listeners.size === 0) {
        this.stopTimer = window.setTimeout(() => this.stop(), IDLE_STOP_MS);
      }
    };
  };

  snapshot = (): CollectionState => this.state;

  stop(): void {
    this.abort?.abort();
    this.abort = null;
    this.publisher.cancel();
    if (this.signalOnly) {
      // The version counts changes seen; a watch started again later goes on counting.
      this.state = { ...this.state, loaded: false, complete: false, error: '' };
      return;
    }
    // A page that shows the kind again later renders once before it subscribes: it must not see
    // the objects of this run as a current, complete list (they stopped being watched), nor
    // until the next start's first page arrives (as paged.ts does).
    this.objects.clear();
    this.keys = [];
    this.membershipChanged = false;
    this.state = { ...NOT_ASKED, version: this.state.version + 1 };
  }

  private publish(now = false): void {
    const run = () => {
      if (this.membershipChanged || this.keys.length !== this.objects.size) {
        this.keys = Array.from(this.objects.keys()).sort(compareKeys);
        this.membershipChanged = false;
      }
      // Unchanged objects keep their identity, so memoized rows of them do not re-render.
      const items = this.keys.map((k) => this.objects.get(k)!);
      this.state = { ...this.state, items, version: this.state.version + 1 };
      for (const l of this.listeners) l();
    };
    this.publisher.schedule(run, now);
  }

  private setError(error: string): void {
    this.state = { ...this.state, error };
    for (const l of this.listeners) l();
  }

  private async start(): Promise<void> {
    const abort = new AbortController();
    this.abort = abort;
    let backoff = 500;
    while (!abort.signal.aborted) {
      try {
        let rv: string;
        if (this.signalOnly) {
          rv = await currentRevision(this.path, abort.signal);
          // Starting to watch is no change: the version moves with events only.
          this.state = { ...this.state, loaded: true, complete: true, error: '' };
        } else {
          // The first list is shown page by page; a relist (after 410) replaces the objects
          // only once it is whole.
          const progressive = !this.state.loaded;
          if (progressive) this.objects.clear();
          this.membershipChanged = true;
          const list = await listAll(this.path, abort.signal, (page, more) => {
            if (!progressive || !more || abort.signal.aborted) return;
            for (const o of page) this.objects.set(objectKey(o), o);
            this.membershipChanged = true;
            this.state = { ...this.state, loaded: true, complete: false, error: '' };
            this.publish(true);
          });
          if (abort.signal.aborted) return; // stopped meanwhile: nothing of this run is kept
          this.objects.clear();
          for (const o of list.items) this.objects.set(objectKey(o), o);
          this.membershipChanged = true;
          this.state = { ...this.state, loaded: true, complete: true, error: '' };
          this.publish(true);
          rv = list.resourceVersion;
        }
        let relist = false;
        while (!abort.signal.aborted && !relist) {
          await watch(
            this.path,
            rv,
            (e) => {
              if (abort.signal.aborted) return;
              if (e.type === 'ERROR') {
                relist = true; // 410 Gone and friends: start over from a list
                return;
              }
              const o = e.object as K8sObject;
              if (o?.metadata?.resourceVersion) rv = o.metadata.resourceVersion;
              if (e.type === 'BOOKMARK') return;
              if (this.signalOnly) {
                // nothing kept: the version alone says that something changed
              } else if (e.type === 'DELETED') {
                this.objects.delete(objectKey(o));
                this.membershipChanged = true;
              } else {
                const key = objectKey(o);
                if (!this.objects.has(key)) this.membershipChanged = true;
                this.objects.set(key, o);
              }
              this.publish();
            },
            abort.signal,
          );
          backoff = 500;
        }
      } catch (e) {
        if (abort.signal.aborted) return;
        if (e instanceof ApiError && e.code === 401) return; // signed out
        this.setError(errorText(e));
        await new Promise((r) => setTimeout(r, backoff));
        backoff = Math.min(backoff * 2, 10_000);
      }
    }
  }
}

// Code-unit order of object keys (names are DNS labels: the same as alphabetical, and cheaper
// than localeCompare over thousands of keys).
export function compareKeys(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

const collections = new Map<string, Collection>();

function collection(path: string, signalOnly = false): Collection {
  const key = (signalOnly ? 'changes:' : '') + path;
  let c = collections.get(key);
  if (!c) {
    c = new Collection(path, signalOnly);
    collections.set(key, c);
  }
  return c;
}

// The live contents of an API collection (e.g. paths.nodes).
export function useCollection(path: string): CollectionState {
  const c = collection(path);
  return useSyncExternalStore(c.subscribe, c.snapshot);
}

const NOT_ASKED: CollectionState = { items: [], loaded: false, complete: false, error: '', version: 0 };
const NO_SUBSCRIPTION = () => () => {};
const NOT_ASKED_SNAPSHOT = () => NOT_ASKED;

// useCollection while `enabled` (the kind is listed and watched only then); an empty state else.
export function useCollectionWhen(path: string, enabled: boolean): CollectionState {
  const c = collection(path);
  return useSyncExternalStore(
    enabled ? c.subscribe : NO_SUBSCRIPTION,
    enabled ? c.snapshot : NOT_ASKED_SNAPSHOT,
  );
}

// A value derived from the collection (`select` must return the same value, e.g. a number, while
// what it reads is unchanged): the component re-renders only when that value changes.
export function useCollectionSelect<T>(path: string, select: (s: CollectionState) => T): T {
  const c = collection(path);
  return useSyncExternalStore(c.subscribe, () => select(c.snapshot()));
}

// A number that changes (at most every 100 ms) whenever an object of the kind is created,
// changed or deleted; the kind is watched from its current resourceVersion and never listed.
export function useChanges(path: string): number {
  const c = collection(path, true);
  return useSyncExternalStore(c.subscribe, c.snapshot).version;
}

// The server's ClusterSummary (admin.quartermaster.io/v1alpha1, one object named `cluster`): node
// counts by state and, per kind it follows, the resourceVersion of the kind's newest change. One
// list + watch of it replaces a watch per kind for pages that need counts or change signals only.
export interface ClusterSummaryStatus {
  nodes: { total: number; ready: number; notReady: number; unknown: number; unschedulable: number };
  // resourceVersion of the newest change, by plural: nodes, resourceslices, resourceclaims,
  // devicetaintrules, deviceclasses.
  lastChanges: Record<string, string>;
}

export interface ClusterSummaryState {
  status: ClusterSummaryStatus | null;
  error: string;
}

const selectSummary = (s: CollectionState): ClusterSummaryState => {
  const status = (s.items[0]?.status as ClusterSummaryStatus | undefined) || null;
  const last = summaryCache;
  if (last && last.status === status && last.error === s.error) return last;
  summaryCache = { status, error: s.error };
  return summaryCache;
};
let summaryCache: ClusterSummaryState | null = null;

const NO_SUMMARY: ClusterSummaryState = { status: null, error: '' };
const NO_SUMMARY_SNAPSHOT = () => NO_SUMMARY;

// The summary, listed and watched while `enabled` (a page can wait for its first screen).
export function useClusterSummary(enabled = true): ClusterSummaryState {
  const c = collection(paths.clusterSummaries);
  return useSyncExternalStore(
    enabled ? c.subscribe : NO_SUBSCRIPTION,
    enabled ? () => selectSummary(c.snapshot()) : NO_SUMMARY_SNAPSHOT,
  );
}

// A number that changes whenever an object of one of the kinds `plurals` names (e.g.
// 'resourceclaims') is created, changed or deleted, from the ClusterSummary's lastChanges: as
// useChanges, without a watch of the kinds. The summary's first arrival is no change. Nothing is
// asked for while `enabled` is false.
export function useKindChangesWhen(enabled: boolean, ...plurals: string[]): number {
  const { status } = useClusterSummary(enabled);
  const key = status ? plurals.map((p) => status.lastChanges?.[p] || '0').join('/') : '';
  const seen = useRef({ key: '', changes: 0 });
  if (key !== seen.current.key) {
    if (seen.current.key !== '') seen.current.changes++;
    seen.current.key = key;
  }
  return seen.current.changes;
}

export function useKindChanges(...plurals: string[]): number {
  return useKindChangesWhen(true, ...plurals);
}

// Stops every watch and forgets every object (sign-out).
export function resetCollections(): void {
  for (const c of collections.values()) c.stop();
  collections.clear();
  permissions.clear();
}

// --- Permissions (SelfSubjectAccessReview) -----------------------------------------------------

export interface Permission {
  allowed: boolean | undefined; // undefined while asking
  reason: string;
}

const permissions = new Map<string, Promise<Permission>>();

function describe(verb: string, resource: string, group: string, namespace?: string): string {
  const what = group ? `${resource}.${group}` : resource;
  return `${verb} ${what}${namespace ? ` in namespace ${namespace}` : ''}`;
}

export function checkPermission(
  verb: string,
  resource: string,
  group: string,
  namespace?: string,
): Promise<Permission> {
  const key = [verb, resource, group, namespace || ''].join('|');
  let p = permissions.get(key);
  if (!p) {
    p = request(paths.accessReview, {
      method: 'POST',
      body: {
        apiVersion: 'authorization.k8s.io/v1',
        kind: 'SelfSubjectAccessReview',
        spec: { resourceAttributes: { verb, resource, group, namespace } },
      },
    }).then(
      (r) => ({
        allowed: !!r.status?.allowed,
        reason: r.status?.allowed
          ? ''
          : `Read-only: your identity may not ${describe(verb, resource, group, namespace)}` +
            (r.status?.reason ? ` (${r.status.reason})` : ' (RBAC denies it)'),
      }),
      (e) => ({ allowed: false, reason: `Could not check permissions: ${errorText(e)}` }),
    );
    permissions.set(key, p);
  }
  return p;
}

// Whether the signed-in identity may do `verb` on `resource` (asks the server once per session).
export function useCan(verb: string, resource: string, group = '', namespace?: string): Permission {
  const [perm, setPerm] = useState<Permission>({ allowed: undefined, reason: '' });
  useEffect(() => {
    let live = true;
    checkPermission(verb, resource, group, namespace).then((p) => live && setPerm(p));
    return () => {
      live = false;
    };
  }, [verb, resource, group, namespace]);
  return perm;
}
