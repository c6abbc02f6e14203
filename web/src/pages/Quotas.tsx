import { useState } from 'react';
import { ApiError, K8sObject, StatusCause, errorText, paths, request } from '../api';
import { GuardedButton, LoadState } from '../components';
import { useCan, useCollection } from '../store';

function QuotaRow({ q }: { q: K8sObject }) {
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
  return (
    <tr>
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

export function QuotasPage() {
  const quotas = useCollection(paths.quotas);
  return (
    <section aria-labelledby="quotas-title">
      <h1 id="quotas-title">Quotas</h1>
      <p>
        ResourceQuotas per namespace: used against hard, per device class (
        <code>&lt;class&gt;.deviceclass.resource.k8s.io/devices</code>) and per resource.
      </p>
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
              <QuotaRow key={`${q.metadata.namespace}/${q.metadata.name}`} q={q} />
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
