// The REST API as the UI uses it: the same Kubernetes-style endpoints kubectl uses, with the
// bearer token from the sign-in form (kept in sessionStorage only).

export interface ObjectMeta {
  name: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  creationTimestamp?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Json = any;

export interface K8sObject {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
  spec?: Json;
  status?: Json;
}

export interface StatusCause {
  field?: string;
  message?: string;
  reason?: string;
}

// A failed request: the HTTP code and the Kubernetes Status the server answered.
export class ApiError extends Error {
  readonly code: number;
  readonly reason: string;
  readonly causes: StatusCause[];

  constructor(code: number, message: string, reason = '', causes: StatusCause[] = []) {
    super(message);
    this.code = code;
    this.reason = reason;
    this.causes = causes;
  }
}

const TOKEN_KEY = 'quartermaster.token';

export function getToken(): string | null {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(token: string): void {
  sessionStorage.setItem(TOKEN_KEY, token);
}

export function clearToken(): void {
  sessionStorage.removeItem(TOKEN_KEY);
}

let unauthorized: (message: string) => void = () => {};

// Called when the API answers 401: the app signs out and shows the message on the form.
export function onUnauthorized(handler: (message: string) => void): void {
  unauthorized = handler;
}

export const UNAUTHORIZED_MESSAGE =
  'The server did not accept the token (401 Unauthorized). Sign in again.';

function headers(contentType?: string): Record<string, string> {
  const h: Record<string, string> = { Accept: 'application/json' };
  const token = getToken();
  if (token) h.Authorization = `Bearer ${token}`;
  if (contentType) h['Content-Type'] = contentType;
  return h;
}

async function errorFrom(res: Response): Promise<ApiError> {
  const text = await res.text();
  let status: Json = null;
  try {
    status = JSON.parse(text);
  } catch {
    // not a Status
  }
  if (res.status === 401) unauthorized(UNAUTHORIZED_MESSAGE);
  if (status && status.kind === 'Status') {
    return new ApiError(
      res.status,
      status.message || `${res.status} ${res.statusText}`,
      status.reason || '',
      (status.details && status.details.causes) || [],
    );
  }
  return new ApiError(res.status, text || `${res.status} ${res.statusText}`);
}

export interface RequestOptions {
  method?: string;
  body?: unknown;
  contentType?: string;
  signal?: AbortSignal;
}

export async function request<T = Json>(path: string, options: RequestOptions = {}): Promise<T> {
  const method = options.method || 'GET';
  const hasBody = options.body !== undefined;
  const res = await fetch(path, {
    method,
    headers: headers(hasBody ? options.contentType || 'application/json' : undefined),
    body: hasBody ? JSON.stringify(options.body) : undefined,
    signal: options.signal,
    cache: 'no-store',
  });
  if (!res.ok) throw await errorFrom(res);
  const text = await res.text();
  return (text ? JSON.parse(text) : null) as T;
}

export function withQuery(path: string, query: Record<string, string | undefined>): string {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== '') params.set(k, v);
  const q = params.toString();
  if (!q) return path;
  return path + (path.includes('?') ? '&' : '?') + q;
}

export interface ListResult {
  items: K8sObject[];
  resourceVersion: string;
}

// Lists every object under `path`, page by page (limit/continue: 500, then 2,000 at a time, as
// each request costs the browser more than the server's work for a larger page); `onPage` sees
// each page as it arrives (with `more` while pages remain), so a page can render before the last
// one.
export async function listAll(
  path: string,
  signal?: AbortSignal,
  onPage?: (items: K8sObject[], more: boolean) => void,
): Promise<ListResult> {
  const items: K8sObject[] = [];
  let cont = '';
  let resourceVersion = '';
  for (;;) {
    const page = await request(withQuery(path, { limit: cont ? '2000' : '500', continue: cont || undefined }), {
      signal,
    });
    const got: K8sObject[] = page.items || [];
    for (const item of got) items.push(item);
    resourceVersion = page.metadata?.resourceVersion || resourceVersion;
    cont = page.metadata?.continue || '';
    onPage?.(got, !!cont);
    if (!cont) break;
  }
  return { items, resourceVersion };
}

// The collection's current resourceVersion, read with a one-item list (to watch from it without
// listing everything).
export async function currentRevision(path: string, signal?: AbortSignal): Promise<string> {
  const page = await request(withQuery(path, { limit: '1' }), { signal });
  return page.metadata?.resourceVersion || '';
}

export interface WatchEvent {
  type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';
  object: Json;
}

// Streams a watch from `resourceVersion` (JSON lines over a chunked response) into `onEvent`
// until the server ends it (resolves) or it fails (rejects; aborting rejects with AbortError).
export async function watch(
  path: string,
  resourceVersion: string,
  onEvent: (e: WatchEvent) => void,
  signal: AbortSignal,
): Promise<void> {
  const url = withQuery(path, { watch: '1', resourceVersion, allowWatchBookmarks: 'true' });
  const res = await fetch(url, { headers: headers(), signal, cache: 'no-store' });
  if (!res.ok) throw await errorFrom(res);
  if (!res.body) throw new ApiError(0, 'the browser cannot stream responses');
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buffered = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffered += decoder.decode(value, { stream: true });
    let nl: number;
    while ((nl = buffered.indexOf('\n')) >= 0) {
      const line = buffered.slice(0, nl).trim();
      buffered = buffered.slice(nl + 1);
      if (line) onEvent(JSON.parse(line) as WatchEvent);
    }
  }
}

// Paths of the kinds the UI shows.
export const paths = {
  nodes: '/api/v1/nodes',
  node: (name: string) => `/api/v1/nodes/${encodeURIComponent(name)}`,
  pods: '/api/v1/pods',
  events: '/api/v1/events',
  namespaces: '/api/v1/namespaces',
  quotas: '/api/v1/resourcequotas',
  quota: (ns: string, name: string) =>
    `/api/v1/namespaces/${encodeURIComponent(ns)}/resourcequotas/${encodeURIComponent(name)}`,
  slices: '/apis/resource.k8s.io/v1/resourceslices',
  claims: '/apis/resource.k8s.io/v1/resourceclaims',
  namespacedClaims: (ns: string) => `/apis/resource.k8s.io/v1/namespaces/${encodeURIComponent(ns)}/resourceclaims`,
  classes: '/apis/resource.k8s.io/v1/deviceclasses',
  deviceClass: (name: string) =>
    `/apis/resource.k8s.io/v1/deviceclasses/${encodeURIComponent(name)}`,
  taintRules: '/apis/resource.k8s.io/v1/devicetaintrules',
  taintRule: (name: string) =>
    `/apis/resource.k8s.io/v1/devicetaintrules/${encodeURIComponent(name)}`,
  matchReviews: '/apis/admin.quartermaster.io/v1alpha1/devicematchreviews',
  utilizationReviews: '/apis/admin.quartermaster.io/v1alpha1/utilizationhistoryreviews',
  deviceHistoryReviews: '/apis/admin.quartermaster.io/v1alpha1/deviceallocationhistoryreviews',
  clusterSummaries: '/apis/admin.quartermaster.io/v1alpha1/clustersummaries',
  deviceHolderReviews: '/apis/admin.quartermaster.io/v1alpha1/deviceholderreviews',
  audit: '/apis/audit.quartermaster.io/v1/events',
  selfSubjectReview: '/apis/authentication.k8s.io/v1/selfsubjectreviews',
  accessReview: '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews',
};

export function objectKey(o: K8sObject): string {
  return o.metadata.namespace ? `${o.metadata.namespace}/${o.metadata.name}` : o.metadata.name;
}

// Who the token belongs to (SelfSubjectReview, as `kubectl auth whoami`).
export async function whoAmI(): Promise<{ username: string; groups: string[] }> {
  const review = await request(paths.selfSubjectReview, {
    method: 'POST',
    body: { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' },
  });
  const info = review.status?.userInfo || {};
  return { username: info.username || '', groups: info.groups || [] };
}

export interface DeviceMatch {
  nodeName?: string;
  allNodes?: boolean;
  driver: string;
  pool: string;
  device: string;
  attributes: Record<string, Json>;
  capacity: Record<string, { value: string }>;
  taints?: { key: string; value?: string; effect: string }[];
  allocatedTo?: string[];
}

export interface MatchIssue {
  field: string;
  message: string;
  line?: number;
  column?: number;
  offset?: number;
}

export interface DeviceMatchStatus {
  matchedDevices: number;
  allocatedDevices: number;
  nodes: number;
  truncated: boolean;
  devices: DeviceMatch[];
  errors: MatchIssue[];
  evaluationErrors: string[];
}

// The server-side preview (DeviceMatchReview): which devices a class and/or selectors match.
export async function reviewMatches(
  spec: { className?: string; selectors?: string[]; limit?: number },
  signal?: AbortSignal,
): Promise<DeviceMatchStatus> {
  const body: Json = {
    apiVersion: 'admin.quartermaster.io/v1alpha1',
    kind: 'DeviceMatchReview',
    spec: {} as Json,
  };
  if (spec.className) body.spec.className = spec.className;
  if (spec.selectors) body.spec.selectors = spec.selectors.map((e) => ({ cel: { expression: e } }));
  if (spec.limit) body.spec.limit = spec.limit;
  const review = await request(paths.matchReviews, { method: 'POST', body, signal });
  return review.status as DeviceMatchStatus;
}

export interface UtilizationGroup {
  name: string;
  devices?: number; // absent for namespaces
  tainted?: number; // devices with any taint now; absent for namespaces
  allocated: number[];
  peakAllocated: number[];
  unhealthy?: number[];
  free?: number[];
}

export interface UtilizationStatus {
  start: string;
  end: string;
  stepSeconds: number;
  times: number[]; // bucket starts, Unix seconds
  groups: UtilizationGroup[];
}

export type UtilizationGroupBy = '' | 'class' | 'model' | 'node' | 'namespace';

// Allocated / free / unhealthy devices over time (UtilizationHistoryReview), from the allocation
// history the server records with every binding and release.
export async function reviewUtilization(
  spec: { range: string; groupBy?: UtilizationGroupBy; step?: string },
  signal?: AbortSignal,
): Promise<UtilizationStatus> {
  const body: Json = {
    apiVersion: 'admin.quartermaster.io/v1alpha1',
    kind: 'UtilizationHistoryReview',
    spec: { range: spec.range, groupBy: spec.groupBy || '' } as Json,
  };
  if (spec.step) body.spec.step = spec.step;
  const review = await request(paths.utilizationReviews, { method: 'POST', body, signal });
  return review.status as UtilizationStatus;
}

export interface DeviceHistoryClaim {
  namespace: string;
  name?: string; // absent once the claim is gone
  uid: string;
}

export interface DeviceHistoryEvent {
  time: string; // MicroTime
  type: 'Allocated' | 'Released';
  claim: DeviceHistoryClaim;
  shareID?: string;
  adminAccess: boolean;
}

export interface DeviceHistoryStatus {
  start: string;
  end: string;
  holders: { claim: DeviceHistoryClaim; shareID?: string; adminAccess: boolean }[];
  events: DeviceHistoryEvent[]; // newest first
  truncated: boolean;
}

// One device's holders and allocation history (DeviceAllocationHistoryReview).
export async function reviewDeviceHistory(
  spec: { driver: string; pool: string; device: string; range: string; limit?: number },
  signal?: AbortSignal,
): Promise<DeviceHistoryStatus> {
  const body: Json = {
    apiVersion: 'admin.quartermaster.io/v1alpha1',
    kind: 'DeviceAllocationHistoryReview',
    spec,
  };
  const review = await request(paths.deviceHistoryReviews, { method: 'POST', body, signal });
  return review.status as DeviceHistoryStatus;
}

// An attribute value as text ({"string": "x"} -> "x").
export function attributeText(v: Json): string {
  if (v === null || typeof v !== 'object') return String(v);
  for (const k of ['string', 'int', 'bool', 'version']) if (k in v) return String(v[k]);
  for (const k of ['strings', 'ints', 'bools', 'versions']) {
    if (k in v) return (v[k] as unknown[]).join(', ');
  }
  return JSON.stringify(v);
}

export function errorText(e: unknown): string {
  if (e instanceof ApiError) return e.message;
  if (e instanceof Error) return e.message;
  return String(e);
}
