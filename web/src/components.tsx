import { ButtonHTMLAttributes, Component, ReactNode, Suspense } from 'react';
import { Permission } from './store';
import { navigate } from './router';

export function Link({
  to,
  children,
  current,
  label,
}: {
  to: string;
  children: ReactNode;
  current?: boolean;
  label?: string; // the accessible name, where the text alone is ambiguous
}) {
  return (
    <a
      href={to}
      aria-current={current ? 'page' : undefined}
      aria-label={label}
      onClick={(e) => {
        if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
        e.preventDefault();
        navigate(to);
      }}
    >
      {children}
    </a>
  );
}

// A button that is disabled, with the reason shown, when RBAC does not allow its action.
export function GuardedButton({
  permission,
  children,
  ...rest
}: { permission: Permission; children: ReactNode } & ButtonHTMLAttributes<HTMLButtonElement>) {
  const denied = permission.allowed === false;
  return (
    <button
      type="button"
      {...rest}
      disabled={rest.disabled || permission.allowed !== true}
      title={denied ? permission.reason : rest.title}
      aria-description={denied ? permission.reason : undefined}
    >
      {children}
    </button>
  );
}

// The reason edit controls are disabled, shown once per page.
export function ReadOnlyNotice({ permission }: { permission: Permission }) {
  if (permission.allowed !== false) return null;
  return (
    <p className="notice" role="note">
      {permission.reason}
    </p>
  );
}

export function LoadState({ loaded, error }: { loaded: boolean; error: string }) {
  if (error) {
    return (
      <p role="alert" className="error">
        {error}
      </p>
    );
  }
  if (!loaded) return <p className="loading">Loading…</p>;
  return null;
}

export function Badge({ kind, children }: { kind: 'ok' | 'warn' | 'bad' | 'info'; children: ReactNode }) {
  // The text carries the meaning; the colour only repeats it.
  return <span className={`badge badge-${kind}`}>{children}</span>;
}

export function Labels({ labels }: { labels?: Record<string, string> }) {
  const entries = Object.entries(labels || {});
  if (!entries.length) return <span className="muted">none</span>;
  return (
    <ul className="chips">
      {entries.map(([k, v]) => (
        <li key={k}>
          <code>
            {k}={v}
          </code>
        </li>
      ))}
    </ul>
  );
}

// A tiny YAML writer for showing objects the way kubectl does (JSON values only).
export function toYaml(value: unknown, indent = ''): string {
  const scalar = (v: unknown): string => {
    if (v === null || v === undefined) return 'null';
    if (typeof v === 'string') {
      if (v === '' || /[:#\n"'{}[\],&*!|>%@`]|^\s|\s$|^(true|false|null|yes|no|~|[-+.\d].*)$/i.test(v)) {
        return JSON.stringify(v);
      }
      return v;
    }
    return String(v);
  };
  if (Array.isArray(value)) {
    if (!value.length) return '[]';
    return value
      .map((v) => {
        if (v && typeof v === 'object' && Object.keys(v).length) {
          const inner = toYaml(v, indent + '  ');
          return `${indent}- ${inner.slice(indent.length + 2)}`;
        }
        return `${indent}- ${typeof v === 'object' ? toYaml(v) : scalar(v)}`;
      })
      .join('\n');
  }
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>);
    if (!entries.length) return '{}';
    return entries
      .map(([k, v]) => {
        const key = scalar(k);
        if (v && typeof v === 'object' && (Array.isArray(v) ? v.length : Object.keys(v).length)) {
          return `${indent}${key}:\n${toYaml(v, Array.isArray(v) ? indent : indent + '  ')}`;
        }
        if (typeof v === 'string' && v.includes('\n')) {
          const body = v.split('\n').map((l) => `${indent}  ${l}`).join('\n');
          return `${indent}${key}: |-\n${body}`;
        }
        return `${indent}${key}: ${v && typeof v === 'object' ? toYaml(v) : scalar(v)}`;
      })
      .join('\n');
  }
  return indent + scalar(value);
}

export function age(timestamp?: string): string {
  if (!timestamp) return '';
  const s = Math.max(0, (Date.now() - Date.parse(timestamp)) / 1000);
  if (s < 120) return `${Math.floor(s)}s`;
  if (s < 7200) return `${Math.floor(s / 60)}m`;
  if (s < 172800) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}

// Code loaded on demand (the CEL editor, the chart): while it loads, `loading`; if it cannot be
// loaded (the server restarted with a new build, the network failed), an alert that says what
// is missing and offers a reload, instead of a blank page.
export function Lazy({ what, children }: { what: string; children: ReactNode }) {
  return (
    <LazyBoundary what={what}>
      <Suspense fallback={<p className="loading">Loading {what}…</p>}>{children}</Suspense>
    </LazyBoundary>
  );
}

class LazyBoundary extends Component<{ what: string; children: ReactNode }, { error: string | null }> {
  state = { error: null as string | null };

  static getDerivedStateFromError(error: unknown) {
    return { error: error instanceof Error ? error.message : String(error) };
  }

  render() {
    if (this.state.error === null) return this.props.children;
    return (
      <div role="alert" className="field-error">
        Could not load {this.props.what} ({this.state.error}).{' '}
        <button type="button" onClick={() => window.location.reload()}>
          Reload the page
        </button>
      </div>
    );
  }
}
