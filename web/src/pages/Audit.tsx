import { FormEvent, useEffect, useState } from 'react';
import { Json, errorText, paths, request, withQuery } from '../api';
import { LoadState } from '../components';

interface Filters {
  user: string;
  resource: string;
  namespace: string;
  name: string;
  since: string;
}

const EMPTY: Filters = { user: '', resource: '', namespace: '', name: '', since: '' };

export function AuditPage() {
  const [filters, setFilters] = useState<Filters>(EMPTY);
  const [applied, setApplied] = useState<Filters>(EMPTY);
  const [items, setItems] = useState<Json[]>([]);
  const [cont, setCont] = useState('');
  const [loaded, setLoaded] = useState(false);
  const [error, setError] = useState('');

  const query = (f: Filters, after: string) =>
    withQuery(paths.audit, {
      user: f.user,
      resource: f.resource,
      namespace: f.namespace,
      name: f.name,
      since: f.since ? new Date(f.since).toISOString().replace(/\.\d+Z$/, 'Z') : undefined,
      limit: '200',
      continue: after || undefined,
    });

  const load = async (f: Filters, after: string) => {
    setError('');
    try {
      const page = await request(query(f, after));
      setItems((old) => (after ? [...old, ...(page.items || [])] : page.items || []));
      setCont(page.metadata?.continue || '');
    } catch (e) {
      setError(errorText(e));
      if (!after) setItems([]);
    } finally {
      setLoaded(true);
    }
  };

  useEffect(() => {
    load(applied, '');
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [applied]);

  const submit = (e: FormEvent) => {
    e.preventDefault();
    setApplied({ ...filters });
  };

  const field = (key: keyof Filters, label: string, type = 'text') => (
    <div className="field">
      <label htmlFor={`audit-${key}`}>{label}</label>
      <input
        id={`audit-${key}`}
        type={type}
        value={filters[key]}
        onChange={(e) => setFilters({ ...filters, [key]: e.target.value })}
      />
    </div>
  );

  return (
    <section aria-labelledby="audit-title">
      <h1 id="audit-title">Audit</h1>
      <p>Every change and every denied request, oldest first, from the audit trail in PostgreSQL.</p>
      <form className="filters" onSubmit={submit} aria-label="Audit filters">
        {field('user', 'User')}
        {field('resource', 'Resource')}
        {field('namespace', 'Namespace')}
        {field('name', 'Name')}
        {field('since', 'Since', 'datetime-local')}
        <button type="submit">Search</button>
      </form>
      <LoadState loaded={loaded} error={error} />
      {loaded && !error && items.length === 0 && <p>No audit record matches.</p>}
      {items.length > 0 && (
        <table>
          <thead>
            <tr>
              <th scope="col">Time</th>
              <th scope="col">User</th>
              <th scope="col">Verb</th>
              <th scope="col">Resource</th>
              <th scope="col">Namespace</th>
              <th scope="col">Name</th>
              <th scope="col">Code</th>
              <th scope="col">Source</th>
            </tr>
          </thead>
          <tbody>
            {items.map((r, i) => (
              <tr key={r.id ?? i}>
                <td>{r.time}</td>
                <td>{r.user?.username}</td>
                <td>{r.verb}</td>
                <td>
                  {r.resource}
                  {r.subresource ? `/${r.subresource}` : ''}
                  {r.apiGroup ? `.${r.apiGroup}` : ''}
                </td>
                <td>{r.namespace}</td>
                <td>{r.name}</td>
                <td>{r.code}</td>
                <td>{r.sourceAddress}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {cont && (
        <button type="button" onClick={() => load(applied, cont)}>
          Load more
        </button>
      )}
    </section>
  );
}
