import { useEffect, useRef, useState } from 'react';
import { ApiError, K8sObject, StatusCause, errorText, paths, request } from '../api';
import { GuardedButton, Link, LoadState, ReadOnlyNotice } from '../components';
import { useCan, useCollection } from '../store';

function QuotaRow({ q, target }: { q: K8sObject; target: boolean }) {
  const ns = q.metadata.namespace || '';
  const canEdit = useCan('patch', 'resourcequotas', '', ns);
  const hard: Record<string, string> = q.status?.hard || q.spec?.hard || {};
  const used: Record<string, string> = q.status?.used || {};
  const [editing, setEditing] = useState(false);
  const [draft, setDraft] = useState<Record<string, string>>({});
  const [error, setError] = useState('');
  const [causes, setCauses] = useState<StatusCause[]>([]);
  // The Status causes about one hard limit (field spec.hard[<resource>]), shown next to its input.
  const causesOf = (k: string) => causes.filter((c) => c.field === `spec.hard[${k}]`);
  const fieldId = (k: string) => `quota-${ns}-${q.metadata.name}-${k}`.replace(/[^A-Za-z0-9_-]/g, '_');
  const save = async () => {
    setError('');
    setCauses([]);
    try {
      await request(paths.quota(ns, q.metadata.name), {
        method: 'PATCH',
        contentType: 'application/merge-patch+json',
        body: { spec: { hard: draft } },
      });
      setEditing(false);
    } catch (e) {
      setError(errorText(e));
      if (e instanceof ApiError) setCauses(e.causes);
    }
  };
  const keys = Object.keys(q.spec?.hard || {});
  const row = useRef<HTMLTableRowElement>(null);
  // A linked quota (Pending links the quota that refused a pod's claim) is scrolled into view.
  useEffect(() => {
    if (target) row.current?.scrollIntoView({ block: 'center' });
  }, [target]);
  return (
    <tr
      ref={row}
      data-quota={`${ns}/${q.metadata.name}`}
      aria-current={target ? 'true' : undefined}
      className={target ? 'target' : undefined}
    >
      <td>{ns}</td>
      <th scope="row">{q.metadata.name}</th>
      <td>
        <table className="inner">
          <tbody>
            {keys.map((k) => {
              const u = used[k] ?? '0';
              const h = hard[k] ?? q.spec.hard[k];
              const pct = Number(h) > 0 ? Math.min(100, (100 * Number(u)) / Number(h)) : 0;
              return (
                <tr key={k}>
                  <th scope="row">
                    <code>{k}</code>
                  </th>
                  <td>
                    {u} used of{' '}
                    {editing ? (
                      <>
                        <input
                          aria-label={`Hard limit for ${k}`}
                          value={draft[k] ?? ''}
                          onChange={(e) => setDraft({ ...draft, [k]: e.target.value })}
                          size={8}
                          aria-invalid={causesOf(k).length > 0}
                          aria-describedby={causesOf(k).length ? `${fieldId(k)}-error` : undefined}
                        />
                        {causesOf(k).length > 0 && (
                          <span id={`${fieldId(k)}-error`} className="field-error" data-testid="quota-field-error">
                            {' '}
                            {causesOf(k).map((c) => c.message).join('; ')}
                          </span>
                        )}
                      </>
                    ) : (
                      h
                    )}
                  </td>
                  <td>
                    {!Number.isNaN(pct) && (
                      <meter min={0} max={100} value={pct} aria-label={`${k}: ${u} of ${h}`} />
                    )}
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
        {error && (
          <p role="alert" className="error">
            {error}
          </p>
        )}
      </td>
      <td>
        {editing ? (
          <>
            <button type="button" onClick={save}>
              Save
            </button>{' '}
            <button
              type="button"
              onClick={() => {
                setEditing(false);
                setError('');
                setCauses([]);
              }}
            >
              Cancel
            </button>
          </>
        ) : (
          <GuardedButton
            permission={canEdit}
            onClick={() => {
              setDraft({ ...(q.spec?.hard || {}) });
              setEditing(true);
            }}
            aria-label={`Edit quota ${ns}/${q.metadata.name}`}
          >
            Edit
          </GuardedButton>
        )}
      </td>
    </tr>
  );
}

// `namespace` (and `name`): the quotas a link points at (/quotas/<namespace>[/<name>]), marked
// and scrolled to; the others stay listed.
export function QuotasPage({ namespace, name }: { namespace?: string; name?: string }) {
  const quotas = useCollection(paths.quotas);
  // The whole list's reason (a row's button gives its namespace's own).
  const canEditAny = useCan('patch', 'resourcequotas');
  const isTarget = (q: K8sObject) =>
    !!namespace && q.metadata.namespace === namespace && (!name || q.metadata.name === name);
  const targets = quotas.items.filter(isTarget).length;
  const what = namespace ? (name ? `ResourceQuota ${namespace}/${name}` : `namespace ${namespace}`) : '';
  return (
    <section aria-labelledby="quotas-title">
      <h1 id="quotas-title">Quotas</h1>
      <p>
        ResourceQuotas per namespace: used against hard, per device class (
        <code>&lt;class&gt;.deviceclass.resource.k8s.io/devices</code>) and per resource.
      </p>
      <ReadOnlyNotice permission={canEditAny} />
      {namespace && quotas.loaded && (
        <p role="status" data-testid="quota-target">
          {targets > 0
            ? `Showing ${what} (marked).`
            : name
              ? `No ${what} exists.`
              : `No ResourceQuota in ${what}.`}{' '}
          <Link to="/quotas">All quotas</Link>
        </p>
      )}
      <LoadState loaded={quotas.loaded} error={quotas.error} />
      {quotas.loaded && quotas.items.length === 0 && <p>No ResourceQuota exists.</p>}
      {quotas.items.length > 0 && (
        <table>
          <thead>
            <tr>
              <th scope="col">Namespace</th>
              <th scope="col">Quota</th>
              <th scope="col">Used / hard</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {quotas.items.map((q) => (
              <QuotaRow key={`${q.metadata.namespace}/${q.metadata.name}`} q={q} target={isTarget(q)} />
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
