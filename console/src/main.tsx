import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { AdminView } from './admin-view.js';
import { type Connection, type NewBucket, createBucket } from './api.js';
import { type Capabilities, detectCapabilities } from './capabilities.js';
import { anonymousAccessLeft } from '../../src/client/anonymous-access.js';
import { generateKey } from './format.js';
import { KeysView } from './keys-view.js';
import { saveConnection, savedConnection } from './session.js';
import { saveViewState } from './view-state.js';
import { Notice, errorText } from './ui.js';
import { WebhooksView } from './webhooks-view.js';

type Screen = 'keys' | 'admin' | 'webhooks';

function App() {
  const [conn, setConn] = useState<Connection | undefined>(savedConnection);
  const [caps, setCaps] = useState<Capabilities | undefined>();
  const [screen, setScreen] = useState<Screen>('keys');
  const [notice, setNotice] = useState<{ error?: string; message?: string }>({});
  const [connecting, setConnecting] = useState(false);

  const connect = async (next: Connection, message?: string) => {
    setConnecting(true);
    setNotice({});
    try {
      const detected = await detectCapabilities(next);
      saveConnection(next);
      setConn(next);
      setCaps(detected);
      setScreen('keys');
      if (message) setNotice({ message });
    } catch (err) {
      saveConnection(undefined);
      setConn(undefined);
      setNotice({ error: errorText(err) });
    } finally {
      setConnecting(false);
    }
  };

  // A reload of the tab reconnects with what sessionStorage kept.
  useEffect(() => {
    if (conn && !caps) void connect(conn);
  }, []);

  const show = (next: Screen) => {
    setScreen(next);
    setNotice({});
  };

  const disconnect = (message?: string) => {
    saveConnection(undefined);
    // The next bucket opened in this tab starts at its top, not at this one's prefix.
    saveViewState({ live: false });
    setConn(undefined);
    setCaps(undefined);
    setNotice(message ? { message } : {});
  };

  if (!conn || !caps) {
    return (
      <main class="start">
        <h1>kvb console</h1>
        <Notice {...notice} />
        {connecting && conn ? <p role="status">Connecting…</p> : <StartPage busy={connecting} onConnect={connect} />}
      </main>
    );
  }

  return (
    <>
      <header class="topbar">
        <h1>kvb</h1>
        <p class="bucket">
          <span class="offscreen">Bucket </span>
          <code class="key-text">{conn.bucket}</code> <span class="role">{caps.role}</span>
        </p>
        <nav aria-label="Screens" class="tabs">
          <button type="button" aria-pressed={screen === 'keys'} onClick={() => show('keys')}>
            Keys
          </button>
          {caps.admin && (
            <button type="button" aria-pressed={screen === 'admin'} onClick={() => show('admin')}>
              Admin
            </button>
          )}
          {caps.admin && (
            <button type="button" aria-pressed={screen === 'webhooks'} onClick={() => show('webhooks')}>
              Webhooks
            </button>
          )}
        </nav>
        <button type="button" class="disconnect" onClick={() => disconnect()}>
          Disconnect
        </button>
      </header>
      <main>
        <Notice {...notice} />
        {screen === 'keys' && <KeysView key={conn.bucket} conn={conn} caps={caps} />}
        {screen === 'webhooks' && caps.admin && <WebhooksView key={conn.bucket} conn={conn} />}
        {screen === 'admin' && caps.admin && (
          <AdminView
            conn={conn}
            onCredentialChanged={(credential) => {
              const next = { ...conn, credential };
              saveConnection(next);
              setConn(next);
            }}
            onBucketDeleted={() => disconnect(`Bucket ${conn.bucket} deleted`)}
          />
        )}
      </main>
    </>
  );
}

function StartPage({ busy, onConnect }: { busy: boolean; onConnect: (c: Connection, message?: string) => Promise<void> }) {
  const [bucket, setBucket] = useState('');
  const [credential, setCredential] = useState('');
  return (
    <div class="start-grid">
      <form
        class="card"
        aria-labelledby="connect-title"
        onSubmit={(e) => {
          e.preventDefault();
          if (bucket.trim()) void onConnect({ bucket: bucket.trim(), credential: credential.trim() });
        }}
      >
        <h2 id="connect-title">Open a bucket</h2>
        <label class="field">
          <span>Bucket</span>
          <input value={bucket} required autocomplete="off" spellcheck={false} onInput={(e) => setBucket(e.currentTarget.value)} />
        </label>
        <label class="field">
          <span>Credential</span>
          <input
            type="password"
            value={credential}
            autocomplete="off"
            aria-describedby="credential-help"
            onInput={(e) => setCredential(e.currentTarget.value)}
          />
        </label>
        <p id="credential-help" class="help">
          A secret, read or write key, or a token. It is kept in this tab only (sessionStorage) and sent as a Bearer credential.
        </p>
        <button type="submit" class="primary" disabled={busy || !bucket.trim()}>
          Connect
        </button>
      </form>
      <CreateBucket busy={busy} onCreated={(id, secret) => onConnect({ bucket: id, credential: secret }, `Bucket ${id} created`)} />
    </div>
  );
}

const CREATE_KEYS = [
  ['secret_key', 'Secret key'],
  ['read_key', 'Read key'],
  ['write_key', 'Write key'],
  ['signing_key', 'Signing key'],
] as const;

function CreateBucket({ busy, onCreated }: { busy: boolean; onCreated: (id: string, secret: string) => Promise<void> }) {
  // Private by default, as `kvb init`: a secret, a read and a write key, each generated.
  const [fields, setFields] = useState<NewBucket>({
    email: '',
    secret_key: generateKey(),
    read_key: generateKey(),
    write_key: generateKey(),
  });
  const open = anonymousAccessLeft(CREATE_KEYS.map(([name]) => name).filter((name) => fields[name]?.trim()));
  const [error, setError] = useState<string | undefined>();
  const set = (name: keyof NewBucket, value: string) => setFields((f) => ({ ...f, [name]: value }));
  const submit = async (event: Event) => {
    event.preventDefault();
    setError(undefined);
    if (!fields.email?.trim()) return setError('An email is required');
    if (fields.default_ttl && !/^\d+$/.test(fields.default_ttl.trim())) return setError('Default TTL must be a whole number of seconds');
    try {
      const id = await createBucket(fields);
      await onCreated(id, fields.secret_key ?? '');
    } catch (err) {
      setError(errorText(err));
    }
  };
  return (
    <form class="card" aria-labelledby="create-title" onSubmit={(e) => void submit(e)} noValidate>
      <h2 id="create-title">Create a bucket</h2>
      <Notice error={error} />
      <label class="field">
        <span>Email</span>
        <input type="email" value={fields.email} required autocomplete="email" onInput={(e) => set('email', e.currentTarget.value)} />
      </label>
      {CREATE_KEYS.map(([name, label]) => (
        <div class="field" key={name}>
          <label for={`create-${name}`}>{label}</label>
          <div class="inline">
            <input
              id={`create-${name}`}
              value={fields[name] ?? ''}
              autocomplete="off"
              spellcheck={false}
              onInput={(e) => set(name, e.currentTarget.value)}
            />
            <button type="button" onClick={() => set(name, generateKey())}>
              Generate {label.toLowerCase()}
            </button>
          </div>
        </div>
      ))}
      {open.length > 0 && (
        <p class="notice error" role="status">
          Anonymous access: anyone who can reach this server will be able to {open.join('; ')}. Fill in the empty keys above to make the
          bucket private.
        </p>
      )}
      <label class="field">
        <span>Default TTL in seconds (empty: the server's default, 0: never)</span>
        <input inputMode="numeric" value={fields.default_ttl ?? ''} onInput={(e) => set('default_ttl', e.currentTarget.value)} />
      </label>
      <label class="field">
        <span>Bucket-creation key (only if the server's operator requires one)</span>
        <input
          type="password"
          value={fields.creationKey ?? ''}
          autocomplete="off"
          onInput={(e) => set('creationKey', e.currentTarget.value)}
        />
      </label>
      <p class="help">
        Keep the keys: the secret key is the bucket's admin credential, the read and write keys are what apps read and write with, and the
        server never shows any of them again.
      </p>
      <button type="submit" class="primary" disabled={busy}>
        Create bucket
      </button>
    </form>
  );
}

render(<App />, document.getElementById('app')!);
