import { FormEvent, lazy, useEffect, useMemo, useRef, useState } from 'react';
import {
  ApiError,
  DeviceMatchStatus,
  Json,
  K8sObject,
  StatusCause,
  errorText,
  paths,
  request,
  reviewMatches,
  withQuery,
} from '../api';
import type { CelProblem } from '../CelEditor';

// CodeMirror is loaded with the editor only: the list pages do not wait for it.
const CelEditor = lazy(() => import('../CelEditor').then((m) => ({ default: m.CelEditor })));
import { GuardedButton, Lazy, Link, LoadState, ReadOnlyNotice, toYaml } from '../components';
import { deviceModel } from '../model';
import { useClassClaims } from '../holders';
import { navigate } from '../router';
import { useCan, useCollection, useKindChanges } from '../store';

const GROUP = 'resource.k8s.io';
const DEBOUNCE_MS = 350;
// The Delete confirmation names this many of the claims that use the class (and counts them all).
const CLAIMS_NAMED = 5;

function selectorsOf(c: K8sObject): string[] {
  return (c.spec?.selectors || []).map((s: Json) => s.cel?.expression ?? '');
}

// One entry of spec.config as the form edits it: an opaque configuration (driver and JSON
// parameters), or an entry of another kind, kept as it is.
interface ConfigDraft {
  key: number;
  driver: string;
  parameters: string; // JSON text
  other?: Json; // not an opaque entry: kept verbatim
}

function configsOf(c: K8sObject): ConfigDraft[] {
  return (c.spec?.config || []).map((entry: Json) =>
    entry && typeof entry === 'object' && entry.opaque && Object.keys(entry).length === 1
      ? {
          key: nextKey++,
          driver: entry.opaque.driver ?? '',
          parameters:
            entry.opaque.parameters === undefined ? '' : JSON.stringify(entry.opaque.parameters, null, 2),
        }
      : { key: nextKey++, driver: '', parameters: '', other: entry },
  );
}

// The parameters as JSON, or why they are not.
function parseParameters(text: string): { value?: Json; error?: string } {
  if (!text.trim()) return { error: 'Required: the driver\'s parameters as a JSON object' };
  try {
    const value = JSON.parse(text);
    if (value === null || typeof value !== 'object' || Array.isArray(value)) {
      return { error: 'must be a JSON object, e.g. {"apiVersion": "...", "kind": "..."}' };
    }
    return { value };
  } catch (e) {
    return { error: `not valid JSON: ${(e as Error).message}` };
  }
}

interface Counts {
  matched: number;
  allocated: number;
  nodes: number;
  error: string;
}

export function DeviceClassesPage() {
  const classes = useCollection(paths.classes);
  // Slices and claims only say when to count again: neither listed nor watched (the
  // ClusterSummary's lastChanges say when they change).
  const devicesChanged = useKindChanges('resourceslices', 'resourceclaims');
  const canCreate = useCan('create', 'deviceclasses', GROUP);
  const [counts, setCounts] = useState<Record<string, Counts>>({});
  const countsRef = useRef<Record<string, Counts>>({});

  // Counts come from the server's preview (the same matching the allocator does); they are
  // recomputed when classes, slices or claims change, debounced.
  useEffect(() => {
    if (!classes.loaded) return;
    const superseded = new AbortController();
    // The first counts at once; recounts after changes debounced.
    const first = Object.keys(countsRef.current).length === 0;
    const timer = window.setTimeout(async () => {
      const next: Record<string, Counts> = {};
      await Promise.all(
        classes.items.map(async (c) => {
          try {
            const s = await reviewMatches({ className: c.metadata.name, limit: 1 });
            next[c.metadata.name] = {
              matched: s.matchedDevices,
              allocated: s.allocatedDevices,
              nodes: s.nodes,
              error: s.errors.map((e) => e.message).join('; '),
            };
          } catch (e) {
            next[c.metadata.name] = { matched: 0, allocated: 0, nodes: 0, error: errorText(e) };
          }
        }),
      );
      if (!superseded.signal.aborted) {
        countsRef.current = next;
        setCounts(next);
      }
    }, first ? 0 : DEBOUNCE_MS);
    // A newer count supersedes this one: its answers are dropped rather than its requests
    // aborted (an aborted request reads as a failure).
    return () => {
      superseded.abort();
      window.clearTimeout(timer);
    };
  }, [classes.loaded, classes.version, devicesChanged]); // eslint-disable-line

  return (
    <section aria-labelledby="classes-title">
      <h1 id="classes-title">Device classes</h1>
      <ReadOnlyNotice permission={canCreate} />
      <p>
        <GuardedButton permission={canCreate} onClick={() => navigate('/device-classes/new')}>
          Create device class
        </GuardedButton>
      </p>
      <LoadState loaded={classes.loaded} error={classes.error} />
      {classes.loaded && classes.items.length === 0 && <p>No device class exists yet.</p>}
      {classes.items.length > 0 && (
        <table>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Selectors</th>
              <th scope="col">Extended resource</th>
              <th scope="col">Matches</th>
              <th scope="col">In use</th>
            </tr>
          </thead>
          <tbody>
            {classes.items.map((c) => {
              const n = counts[c.metadata.name];
              return (
                <tr key={c.metadata.name} data-class={c.metadata.name}>
                  <th scope="row">
                    <Link to={`/device-classes/${encodeURIComponent(c.metadata.name)}`}>
                      {c.metadata.name}
                    </Link>
                  </th>
                  <td>
                    {selectorsOf(c).map((s, i) => (
                      <pre key={i} className="cel">
                        {s}
                      </pre>
                    ))}
                  </td>
                  <td>{c.spec?.extendedResourceName || <span className="muted">none</span>}</td>
                  <td data-testid="matches">
                    {n === undefined ? (
                      '…'
                    ) : n.error ? (
                      <span className="error">{n.error}</span>
                    ) : (
                      `${n.matched} devices on ${n.nodes} ${n.nodes === 1 ? 'node' : 'nodes'}`
                    )}
                  </td>
                  <td data-testid="in-use">{n === undefined ? '…' : n.allocated}</td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
    </section>
  );
}

interface SelectorDraft {
  key: number;
  expression: string;
}

let nextKey = 1;

function Preview({ status, error }: { status: DeviceMatchStatus | null; error: string }) {
  if (error) {
    return (
      <p role="alert" className="error">
        Preview failed: {error}
      </p>
    );
  }
  if (!status) return <p className="muted">Type a selector to see the devices it matches.</p>;
  if (status.errors.length) return <p className="muted">Fix the selectors to see the matches.</p>;
  const n = status.matchedDevices;
  return (
    <>
      <p data-testid="preview-summary">
        Matches {n} {n === 1 ? 'device' : 'devices'} on {status.nodes}{' '}
        {status.nodes === 1 ? 'node' : 'nodes'} ({status.allocatedDevices} in use)
      </p>
      {status.evaluationErrors.length > 0 && (
        <ul className="error">
          {status.evaluationErrors.map((e) => (
            <li key={e}>{e}</li>
          ))}
        </ul>
      )}
      {status.devices.length > 0 && (
        <table data-testid="preview-devices">
          <thead>
            <tr>
              <th scope="col">Node</th>
              <th scope="col">Device</th>
              <th scope="col">Model</th>
              <th scope="col">Memory</th>
              <th scope="col">In use by</th>
            </tr>
          </thead>
          <tbody>
            {status.devices.map((d) => (
              <tr key={`${d.driver}/${d.pool}/${d.device}`}>
                <td>{d.nodeName || (d.allNodes ? 'all nodes' : 'selected nodes')}</td>
                <th scope="row">
                  {d.pool}/{d.device}
                </th>
                <td>{deviceModel(d.attributes, d.driver)}</td>
                <td>{d.capacity.memory?.value ?? ''}</td>
                <td>{d.allocatedTo?.join(', ') || 'free'}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {status.truncated && <p className="muted">Only the first {status.devices.length} are listed.</p>}
    </>
  );
}

function positioned(p: CelProblem): string {
  return p.line ? `Line ${p.line}, column ${p.column}: ${p.message}` : p.message;
}

export function ClassEditorPage({ name }: { name?: string }) {
  const editing = name !== undefined;
  const classes = useCollection(paths.classes);
  const existing = editing ? classes.items.find((c) => c.metadata.name === name) : undefined;
  const canSave = useCan(editing ? 'update' : 'create', 'deviceclasses', GROUP);
  const canDelete = useCan('delete', 'deviceclasses', GROUP);

  const [className, setClassName] = useState(name || '');
  const [selectors, setSelectors] = useState<SelectorDraft[]>(
    editing ? [] : [{ key: nextKey++, expression: '' }],
  );
  const [extended, setExtended] = useState('');
  const [configs, setConfigs] = useState<ConfigDraft[]>([]);
  const [seeded, setSeeded] = useState(!editing);
  const [causes, setCauses] = useState<StatusCause[]>([]);
  const [saveError, setSaveError] = useState('');
  const [preview, setPreview] = useState<DeviceMatchStatus | null>(null);
  const [previewError, setPreviewError] = useState('');
  const [confirmDelete, setConfirmDelete] = useState(false);
  const [saving, setSaving] = useState(false);

  // Seed the form from the stored class once it has arrived.
  useEffect(() => {
    if (!editing || seeded || !existing) return;
    setSelectors(selectorsOf(existing).map((e) => ({ key: nextKey++, expression: e })));
    setExtended(existing.spec?.extendedResourceName || '');
    setConfigs(configsOf(existing));
    setSeeded(true);
  }, [editing, seeded, existing]);

  const object = useMemo((): K8sObject => {
    const spec: Json = { ...(existing?.spec || {}) };
    spec.selectors = selectors.map((s) => ({ cel: { expression: s.expression } }));
    if (!spec.selectors.length) delete spec.selectors;
    if (extended.trim()) spec.extendedResourceName = extended.trim();
    else delete spec.extendedResourceName;
    // Entries whose parameters do not parse are sent without them: the server then names what
    // else is wrong, and Save waits for the JSON to be fixed.
    spec.config = configs.map((c) => {
      if (c.other !== undefined) return c.other;
      const opaque: Json = { driver: c.driver.trim() };
      const parsed = parseParameters(c.parameters);
      if (parsed.value !== undefined) opaque.parameters = parsed.value;
      return { opaque };
    });
    if (!spec.config.length) delete spec.config;
    const metadata: Json = editing
      ? { ...existing?.metadata, name: className }
      : { name: className };
    if (editing) {
      for (const k of ['managedFields', 'creationTimestamp', 'uid', 'generation']) delete metadata[k];
    }
    return { apiVersion: `${GROUP}/v1`, kind: 'DeviceClass', metadata, spec };
  }, [selectors, extended, configs, className, editing, existing]);
  const configProblems = configs.map((c) => (c.other === undefined ? parseParameters(c.parameters).error : undefined));
  const configsValid = configProblems.every((p) => p === undefined);

  const savingRef = useRef(false);
  const checkingRef = useRef<Promise<unknown> | null>(null);
  const write = (dryRun: boolean, signal?: AbortSignal) => {
    const query = { dryRun: dryRun ? 'All' : undefined, fieldValidation: 'Strict' };
    if (!editing) return request(withQuery(paths.classes, query), { method: 'POST', body: object, signal });
    // A dry run checks the fields, not who wrote last: without a resourceVersion it is an
    // unconditional update, so a save (or anyone else's write) racing it is no 409. Save keeps
    // the resourceVersion the form loaded: a real conflict there is shown.
    let body = object;
    if (dryRun) {
      const metadata: Json = { ...object.metadata };
      delete metadata.resourceVersion;
      body = { ...object, metadata };
    }
    return request(withQuery(paths.deviceClass(name!), query), { method: 'PUT', body, signal });
  };

  // As you type: the server's validation (a dry-run write, 422 with field paths) and the
  // preview (DeviceMatchReview, problems with positions and the matching devices), debounced.
  useEffect(() => {
    if (!seeded) return;
    // A newer edit supersedes this check: its answers are dropped rather than its requests
    // aborted: an aborted request reads as a failure (the next edit or leaving the page did it).
    const superseded = new AbortController();
    const timer = window.setTimeout(async () => {
      // Once Save is pressed no dry run starts: one answered after the write would see its own
      // class (409 AlreadyExists on a create).
      if (savingRef.current) return;
      const expressions = selectors.map((s) => s.expression);
      const checked = Promise.allSettled([
        reviewMatches({ selectors: expressions.length ? expressions : ['true'], limit: 50 }),
        // A dry run needs the write permission itself: without it only the preview runs.
        className && canSave.allowed ? write(true) : Promise.resolve(null),
      ]);
      checkingRef.current = checked;
      const [review, validation] = await checked;
      if (superseded.signal.aborted) return;
      if (review.status === 'fulfilled') {
        setPreview(review.value);
        setPreviewError('');
      } else {
        setPreview(null);
        setPreviewError(errorText(review.reason));
      }
      if (validation.status === 'fulfilled') {
        setCauses([]);
      } else if (validation.reason instanceof ApiError) {
        const e = validation.reason;
        setCauses(e.causes.length ? e.causes : [{ message: e.message }]);
      }
    }, DEBOUNCE_MS);
    return () => {
      superseded.abort();
      window.clearTimeout(timer);
    };
  }, [object, seeded, canSave.allowed]); // eslint-disable-line

  const selectorProblems = (i: number): CelProblem[] => {
    const field = `spec.selectors[${i}].cel.expression`;
    const fromReview = (preview?.errors || []).filter((e) => e.field === field);
    if (fromReview.length) return fromReview;
    return causes
      .filter((c) => c.field === field)
      .map((c) => ({ message: c.message || '' }));
  };
  const fieldErrors = (field: string) => causes.filter((c) => c.field === field);
  const otherCauses = causes.filter(
    (c) =>
      c.field !== 'metadata.name' &&
      c.field !== 'spec.extendedResourceName' &&
      !(c.field || '').startsWith('spec.selectors[') &&
      !(c.field || '').startsWith('spec.config['),
  );

  // The claims naming this class, asked of the server (a DeviceHolderReview with
  // spec.deviceClassName: no ResourceClaim is read) only while the delete confirmation is open,
  // and again when the ClusterSummary says a claim changed: how many, and the first five named.
  const claims = useClassClaims(name || '', confirmDelete, CLAIMS_NAMED);
  const usedBy = useMemo(() => claims.claims.map((c) => `${c.namespace}/${c.name}`), [claims.claims]);

  const save = async (e: FormEvent) => {
    e.preventDefault();
    setSaving(true);
    setSaveError('');
    savingRef.current = true;
    try {
      // The write follows any dry run in flight, never races it.
      await checkingRef.current;
      await write(false);
      navigate('/device-classes');
    } catch (err) {
      // Saved, the form is left and stays quiet; refused, it checks again as the user edits.
      savingRef.current = false;
      if (err instanceof ApiError && err.causes.length) setCauses(err.causes);
      setSaveError(errorText(err));
    } finally {
      setSaving(false);
    }
  };

  const remove = async () => {
    setSaveError('');
    try {
      await request(paths.deviceClass(name!), { method: 'DELETE' });
      navigate('/device-classes');
    } catch (err) {
      setSaveError(errorText(err));
    }
  };

  if (editing && !classes.loaded) return <LoadState loaded={false} error={classes.error} />;
  if (editing && !existing && !seeded) {
    return (
      <section>
        <h1>Device class {name}</h1>
        <p role="alert" className="error">
          No device class named {name}. <Link to="/device-classes">Back to Device classes</Link>
        </p>
      </section>
    );
  }

  const nameErrors = fieldErrors('metadata.name');
  const extendedErrors = fieldErrors('spec.extendedResourceName');
  return (
    <section aria-labelledby="class-title">
      <h1 id="class-title">{editing ? `Device class ${name}` : 'New device class'}</h1>
      <p>
        <Link to="/device-classes">← Device classes</Link>
      </p>
      <ReadOnlyNotice permission={canSave} />
      <form className="class-form" onSubmit={save} noValidate>
        <div className="field">
          <label htmlFor="class-name">Name</label>
          <input
            id="class-name"
            value={className}
            readOnly={editing}
            aria-invalid={nameErrors.length > 0}
            aria-describedby={nameErrors.length ? 'class-name-error' : undefined}
            onChange={(e) => setClassName(e.target.value)}
            spellCheck={false}
          />
          {nameErrors.length > 0 && (
            <p id="class-name-error" className="field-error" role="alert">
              {nameErrors.map((c) => c.message).join('; ')}
            </p>
          )}
        </div>
        <fieldset>
          <legend>Selectors (CEL, all must match)</legend>
          {selectors.length === 0 && <p className="muted">No selector: the class matches every device.</p>}
          {selectors.map((s, i) => {
            const problems = selectorProblems(i);
            const errorId = `selector-${i}-error`;
            return (
              <div className="field" key={s.key} data-selector={i}>
                <label htmlFor={`selector-${i}`}>Selector {i + 1}</label>
                <Lazy what="the editor">
                  <CelEditor
                    id={`selector-${i}`}
                    label={`Selector ${i + 1}`}
                    value={s.expression}
                    problems={problems}
                    describedBy={errorId}
                    onChange={(v) =>
                      setSelectors((list) =>
                        list.map((x) => (x.key === s.key ? { ...x, expression: v } : x)),
                      )
                    }
                  />
                </Lazy>
                {problems.length > 0 && (
                  <ul id={errorId} className="field-error" role="alert" data-testid="selector-error">
                    {problems.map((p, j) => (
                      <li key={j}>{positioned(p)}</li>
                    ))}
                  </ul>
                )}
                <button
                  type="button"
                  className="link"
                  onClick={() => setSelectors((list) => list.filter((x) => x.key !== s.key))}
                  aria-label={`Remove selector ${i + 1}`}
                >
                  Remove
                </button>
              </div>
            );
          })}
          <button
            type="button"
            onClick={() => setSelectors((list) => [...list, { key: nextKey++, expression: '' }])}
          >
            Add selector
          </button>
        </fieldset>
        <div className="field">
          <label htmlFor="class-extended">Extended resource name (optional)</label>
          <input
            id="class-extended"
            value={extended}
            placeholder="example.com/gpu"
            aria-invalid={extendedErrors.length > 0}
            onChange={(e) => setExtended(e.target.value)}
            spellCheck={false}
          />
          {extendedErrors.length > 0 && (
            <p className="field-error" role="alert">
              {extendedErrors.map((c) => c.message).join('; ')}
            </p>
          )}
        </div>
        <fieldset>
          <legend>Configuration (opaque, passed to the driver)</legend>
          {configs.length === 0 && (
            <p className="muted">
              None. Drivers read these parameters when they prepare the devices of claims for
              this class (e.g. time-slicing or MPS settings).
            </p>
          )}
          {configs.map((c, i) => {
            const serverErrors = causes.filter((x) => (x.field || '').startsWith(`spec.config[${i}]`));
            const problem = configProblems[i];
            const errorId = `config-${i}-error`;
            const messages = [
              ...(problem ? [`Parameters: ${problem}`] : []),
              ...serverErrors.map((x) => `${x.field}: ${x.message}`),
            ];
            return (
              <div className="field config-entry" key={c.key} data-config={i}>
                {c.other !== undefined ? (
                  <p className="muted">Configuration {i + 1} is not an opaque entry; it is kept as it is.</p>
                ) : (
                  <>
                    <label htmlFor={`config-${i}-driver`}>Configuration {i + 1} driver</label>
                    <input
                      id={`config-${i}-driver`}
                      value={c.driver}
                      placeholder="gpu.nvidia.com"
                      spellCheck={false}
                      aria-invalid={serverErrors.some((x) => (x.field || '').endsWith('.driver'))}
                      aria-describedby={messages.length ? errorId : undefined}
                      onChange={(e) =>
                        setConfigs((list) => list.map((x) => (x.key === c.key ? { ...x, driver: e.target.value } : x)))
                      }
                    />
                    <label htmlFor={`config-${i}-parameters`}>Configuration {i + 1} parameters (JSON)</label>
                    <textarea
                      id={`config-${i}-parameters`}
                      value={c.parameters}
                      rows={6}
                      spellCheck={false}
                      placeholder={'{"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig"}'}
                      aria-invalid={problem !== undefined}
                      aria-describedby={messages.length ? errorId : undefined}
                      onChange={(e) =>
                        setConfigs((list) =>
                          list.map((x) => (x.key === c.key ? { ...x, parameters: e.target.value } : x)),
                        )
                      }
                    />
                  </>
                )}
                {messages.length > 0 && (
                  <ul id={errorId} className="field-error" role="alert" data-testid="config-error">
                    {messages.map((m, j) => (
                      <li key={j}>{m}</li>
                    ))}
                  </ul>
                )}
                <button
                  type="button"
                  className="link"
                  onClick={() => setConfigs((list) => list.filter((x) => x.key !== c.key))}
                  aria-label={`Remove configuration ${i + 1}`}
                >
                  Remove
                </button>
              </div>
            );
          })}
          <button
            type="button"
            onClick={() => setConfigs((list) => [...list, { key: nextKey++, driver: '', parameters: '' }])}
          >
            Add configuration
          </button>
        </fieldset>
        {otherCauses.length > 0 && (
          <ul className="error" role="alert">
            {otherCauses.map((c, i) => (
              <li key={i}>
                {c.field ? `${c.field}: ` : ''}
                {c.message}
              </li>
            ))}
          </ul>
        )}
        {saveError && (
          <p role="alert" className="error" data-testid="save-error">
            {saveError}
          </p>
        )}
        <div className="actions">
          <GuardedButton permission={canSave} type="submit" disabled={saving || !className || !configsValid}>
            {editing ? 'Save' : 'Create'}
          </GuardedButton>
          {editing && (
            <GuardedButton permission={canDelete} onClick={() => setConfirmDelete(true)}>
              Delete
            </GuardedButton>
          )}
        </div>
        {confirmDelete && (
          <div className="confirm" role="alertdialog" aria-labelledby="confirm-delete-text">
            <p id="confirm-delete-text" data-testid="confirm-delete-text" aria-busy={!claims.complete && !claims.error}>
              {claims.error
                ? `Could not list the claims that use this class: ${claims.error}.`
                : !claims.complete
                ? 'Looking for claims that use this class…'
                : claims.count
                ? `${claims.count} ${claims.count === 1 ? 'claim uses' : 'claims use'} this class (${usedBy.join(
                    ', ',
                  )}${claims.count > usedBy.length ? ', …' : ''}). Allocated claims keep their devices, but new claims for it will fail.`
                : 'No claim uses this class.'}{' '}
              Delete device class {name}?
            </p>
            <button type="button" onClick={remove}>
              Delete {name}
            </button>{' '}
            <button type="button" onClick={() => setConfirmDelete(false)}>
              Cancel
            </button>
          </div>
        )}
      </form>
      <section aria-labelledby="preview-title" className="preview">
        <h2 id="preview-title">Matching devices</h2>
        <div aria-live="polite">
          <Preview status={preview} error={previewError} />
        </div>
      </section>
      <details>
        <summary>YAML</summary>
        <pre className="yaml">{toYaml(object)}</pre>
      </details>
    </section>
  );
}
