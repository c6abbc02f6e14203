import { FormEvent, useState } from 'react';

// The sign-in form: a bearer token (static token, the admin token in <data-dir>/admin.token, or
// a ServiceAccount token from `kubectl create token`). It is kept in sessionStorage only.
export function SignIn({
  onSignIn,
  message,
}: {
  onSignIn: (token: string) => Promise<void>;
  message: string;
}) {
  const [token, setToken] = useState('');
  const [busy, setBusy] = useState(false);

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    if (!token.trim()) return;
    setBusy(true);
    try {
      await onSignIn(token.trim());
    } catch {
      // the message comes back through `message`
    } finally {
      setBusy(false);
    }
  };

  return (
    <main className="signin">
      <h1>Quartermaster</h1>
      <p>GPU and accelerator allocation. Sign in with a bearer token.</p>
      <form onSubmit={submit} aria-describedby="signin-help">
        <label htmlFor="token">Token</label>
        <input
          id="token"
          name="token"
          type="password"
          autoComplete="off"
          spellCheck={false}
          value={token}
          onChange={(e) => setToken(e.target.value)}
          required
          autoFocus
        />
        <p id="signin-help" className="hint">
          The admin token is in <code>&lt;data-dir&gt;/admin.token</code>; a ServiceAccount token
          comes from <code>kubectl create token NAME</code>. The token stays in this browser tab
          (session storage) and is sent only to this server.
        </p>
        {message && (
          <p role="alert" className="error">
            {message}
          </p>
        )}
        <button type="submit" disabled={busy}>
          Sign in
        </button>
      </form>
    </main>
  );
}
