import { useCallback, useEffect, useState } from 'react';
import { clearToken, errorText, getToken, onUnauthorized, setToken, whoAmI } from './api';
import { Link } from './components';
import { navigate, usePath } from './router';
import { resetHolders } from './holders';
import { resetPaged } from './paged';
import { resetCollections } from './store';
import { AssignmentsPage } from './pages/Assignments';
import { AuditPage } from './pages/Audit';
import { ClassEditorPage, DeviceClassesPage } from './pages/DeviceClasses';
import { InventoryPage } from './pages/Inventory';
import { OverviewPage } from './pages/Overview';
import { PendingPage } from './pages/Pending';
import { QuotasPage } from './pages/Quotas';
import { SignIn } from './pages/SignIn';

// The navigation, in the order the issue lists the pages; the names are part of the contract
// (tests and docs refer to them).
const NAV: { name: string; path: string }[] = [
  { name: 'Overview', path: '/overview' },
  { name: 'Device classes', path: '/device-classes' },
  { name: 'Inventory', path: '/inventory' },
  { name: 'Assignments', path: '/assignments' },
  { name: 'Pending', path: '/pending' },
  { name: 'Quotas', path: '/quotas' },
  { name: 'Audit', path: '/audit' },
];

function Page({ path }: { path: string }) {
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  switch (parts[0]) {
    case undefined:
    case 'overview':
      return <OverviewPage />;
    case 'device-classes':
      if (parts[1] === 'new') return <ClassEditorPage />;
      if (parts[1]) return <ClassEditorPage name={parts[1]} />;
      return <DeviceClassesPage />;
    case 'inventory':
      return <InventoryPage node={parts[1]} />;
    case 'assignments':
      return <AssignmentsPage />;
    case 'pending':
      return <PendingPage />;
    case 'quotas':
      return <QuotasPage namespace={parts[1]} name={parts[2]} />;
    case 'audit':
      return <AuditPage />;
    default:
      return (
        <section>
          <h1>Not found</h1>
          <p>
            No page at {path}. <Link to="/overview">Go to the overview</Link>.
          </p>
        </section>
      );
  }
}

export function App() {
  const path = usePath();
  const [user, setUser] = useState<string | null>(null);
  const [checking, setChecking] = useState<boolean>(!!getToken());
  const [message, setMessage] = useState('');

  const signOut = useCallback((why = '') => {
    clearToken();
    resetCollections();
    resetPaged();
    resetHolders();
    setUser(null);
    setMessage(why);
  }, []);

  useEffect(() => {
    onUnauthorized((why) => signOut(why));
  }, [signOut]);

  // A token from earlier in this tab's session: check it is still good.
  useEffect(() => {
    if (!getToken()) return;
    whoAmI()
      .then((me) => setUser(me.username))
      .catch((e) => signOut(errorText(e)))
      .finally(() => setChecking(false));
  }, [signOut]);

  const signIn = async (token: string) => {
    setToken(token);
    try {
      const me = await whoAmI();
      setMessage('');
      setUser(me.username);
    } catch (e) {
      clearToken();
      // A 401 has already set the message through onUnauthorized.
      if (!(e instanceof Error && 'code' in e && (e as { code: number }).code === 401)) {
        setMessage(errorText(e));
      }
      throw e;
    }
  };

  if (checking) return <p className="loading">Checking your session…</p>;
  if (user === null) return <SignIn onSignIn={signIn} message={message} />;

  const current = '/' + (path.split('/')[1] || 'overview');
  return (
    <div className="app">
      <header className="topbar">
        <a
          className="brand"
          href="/overview"
          onClick={(e) => {
            e.preventDefault();
            navigate('/overview');
          }}
        >
          Quartermaster
        </a>
        <nav aria-label="Main">
          <ul>
            {NAV.map((n) => (
              <li key={n.path}>
                <Link to={n.path} current={current === n.path}>
                  {n.name}
                </Link>
              </li>
            ))}
          </ul>
        </nav>
        <div className="who">
          <span title="Signed in as">{user || '(unnamed)'}</span>
          <button type="button" onClick={() => signOut('You have signed out.')}>
            Sign out
          </button>
        </div>
      </header>
      <main id="main">
        <Page path={path} />
      </main>
    </div>
  );
}
