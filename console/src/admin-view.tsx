import { Fragment } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { type Connection, PERMISSIONS, type Permission, type Policy, deleteBucket, getPolicy, mintToken, updateBucket } from './api.js';
import { generateKey } from './format.js';
import { CopyButton, Notice, errorText } from './ui.js';

const KEY_KINDS = [
  { field: 'secret_key', name: 'secret key', has: 'has_secret_key', clearable: false },
  { field: 'read_key', name: 'read key', has: 'has_read_key', clearable: true },
  { field: 'write_key', name: 'write key', has: 'has_write_key', clearable: true },
  { field: 'signing_key', name: 'signing key', has: 'has_signing_key', clearable: true },
] as const;

/** The admin screen (secret key): policy, keys, default TTL, tokens, and deleting the bucket. */
export function AdminView(props: { conn: Connection; onCredentialChanged: (credential: string) => void; onBucketDeleted: () => void }) {
  const { conn } = props;
  const [policy, setPolicy] = useState<Policy | undefined>();
  const [notice, setNotice] = useState<{ error?: string; message?: string }>({});
  // Only the latest read is shown: an older answer that arrives late must not undo a change.
  const latest = useRef(0);
  const refresh = (c: Connection = conn) => {
    const n = ++latest.current;
    return getPolicy(c).then(
      (p) => n === latest.current && setPolicy(p),
      (err: unknown) => n === latest.current && setNotice({ error: errorText(err) }),
    );
  };
  useEffect(() => {
    void refresh();
  }, [conn]);

  /** Runs an admin action, then reads the policy again (with the new secret key when the action rotated it). */
  const act = async (what: string, action: () => Promise<Connection | undefined>) => {
    try {
      const next = await action();
      setNotice({ message: what });
      await refresh(next ?? conn);
    } catch (err) {
      setNotice({ error: errorText(err) });
    }
  };

  return (
    <section class="admin" aria-label="Admin">
      <Notice {...notice} />
      <section aria-labelledby="policy-title" class="card">
        <h2 id="policy-title">Policy</h2>
        {policy && (
          <dl class="policy">
            <dt>Default TTL</dt>
            <dd>{policy.default_ttl === 0 ? 'none (keys never expire)' : `${policy.default_ttl} s`}</dd>
            {KEY_KINDS.map((k) => (
              <Fragment key={k.field}>
                <dt>{k.name[0]!.toUpperCase() + k.name.slice(1)}</dt>
                <dd>{policy[k.has] ? 'set' : 'not set'}</dd>
              </Fragment>
            ))}
            <dt>Signing key generation</dt>
            <dd>{policy.signing_key_generation}</dd>
            <dt>Anonymous callers may</dt>
            <dd>{PERMISSIONS.filter((p) => policy.anonymous_access[p]).join(', ') || 'nothing'}</dd>
          </dl>
        )}
      </section>

      <section aria-labelledby="keys-title" class="card">
        <h2 id="keys-title">Keys</h2>
        {KEY_KINDS.map((k) => (
          <KeyControl
            key={k.field}
            name={k.name}
            isSet={policy?.[k.has] ?? false}
            clearable={k.clearable}
            onSet={(value) =>
              act(`The ${k.name} is ${policy?.[k.has] ? 'rotated' : 'set'}`, async () => {
                await updateBucket(conn, { [k.field]: value });
                if (k.field !== 'secret_key') return;
                // The old secret no longer works: this session continues with the new one.
                props.onCredentialChanged(value);
                return { ...conn, credential: value };
              })
            }
            onClear={() => act(`The ${k.name} is cleared`, () => updateBucket(conn, { [k.field]: null }).then(() => undefined))}
          />
        ))}
      </section>

      <DefaultTtl
        policy={policy}
        onSave={(ttl) => act(`The default TTL is ${ttl} s`, () => updateBucket(conn, { default_ttl: ttl }).then(() => undefined))}
      />
      <MintToken conn={conn} hasSigningKey={policy?.has_signing_key ?? false} />
      <DeleteBucket conn={conn} onDeleted={props.onBucketDeleted} />
    </section>
  );
}

function KeyControl(props: {
  name: string;
  isSet: boolean;
  clearable: boolean;
  onSet: (value: string) => Promise<void>;
  onClear: () => Promise<void>;
}) {
  const [value, setValue] = useState('');
  const id = props.name.replace(/ /g, '-');
  return (
    <form
      class="key-control"
      onSubmit={(e) => {
        e.preventDefault();
        if (value) void props.onSet(value).then(() => setValue(''));
      }}
    >
      <label class="field" for={`new-${id}`}>
        <span>
          New {props.name} <small>({props.isSet ? 'set' : 'not set'})</small>
        </span>
      </label>
      <div class="inline">
        <input
          id={`new-${id}`}
          type="text"
          value={value}
          autocomplete="off"
          spellcheck={false}
          onInput={(e) => setValue(e.currentTarget.value)}
        />
        <button type="button" onClick={() => setValue(generateKey())}>
          Generate {props.name}
        </button>
        <button type="submit" disabled={!value}>
          {props.isSet ? 'Rotate' : 'Set'} {props.name}
        </button>
        {props.clearable && (
          <button type="button" class="danger" disabled={!props.isSet} onClick={() => void props.onClear()}>
            Clear {props.name}
          </button>
        )}
      </div>
    </form>
  );
}

function DefaultTtl(props: { policy: Policy | undefined; onSave: (ttl: number) => Promise<void> }) {
  const [value, setValue] = useState('');
  useEffect(() => {
    if (props.policy) setValue(String(props.policy.default_ttl));
  }, [props.policy?.default_ttl]);
  const valid = /^\d+$/.test(value.trim());
  return (
    <form
      class="card"
      aria-labelledby="ttl-title"
      onSubmit={(e) => {
        e.preventDefault();
        if (valid) void props.onSave(Number(value.trim()));
      }}
    >
      <h2 id="ttl-title">Default TTL</h2>
      <div class="inline">
        <label class="field">
          <span>Default TTL in seconds (0 = never expire)</span>
          <input
            inputMode="numeric"
            value={value}
            onInput={(e) => setValue(e.currentTarget.value)}
            aria-invalid={valid ? undefined : 'true'}
          />
        </label>
        <button type="submit" disabled={!valid}>
          Save default TTL
        </button>
      </div>
    </form>
  );
}

function MintToken({ conn, hasSigningKey }: { conn: Connection; hasSigningKey: boolean }) {
  const [prefix, setPrefix] = useState('');
  const [permissions, setPermissions] = useState<Set<Permission>>(new Set(['read', 'enumerate']));
  const [ttl, setTtl] = useState('3600');
  const [token, setToken] = useState('');
  const [error, setError] = useState<string | undefined>();
  const mint = async (event: Event) => {
    event.preventDefault();
    setError(undefined);
    setToken('');
    if (!prefix) return setError('A token needs a non-empty prefix');
    if (permissions.size === 0) return setError('Choose at least one permission');
    if (!/^\d+$/.test(ttl.trim()) || Number(ttl) <= 0) return setError('TTL must be a whole number of seconds, more than 0');
    try {
      setToken(
        await mintToken(
          conn,
          prefix,
          PERMISSIONS.filter((p) => permissions.has(p)),
          Number(ttl),
        ),
      );
    } catch (err) {
      setError(errorText(err));
    }
  };
  return (
    <form class="card" aria-labelledby="mint-title" onSubmit={(e) => void mint(e)} noValidate>
      <h2 id="mint-title">Temporary token</h2>
      {!hasSigningKey && <p class="help">Minting needs a signing key: set one above first.</p>}
      <Notice error={error} />
      <div class="field-row">
        <label class="field">
          <span>Prefix</span>
          <input value={prefix} spellcheck={false} autocomplete="off" onInput={(e) => setPrefix(e.currentTarget.value)} />
        </label>
        <label class="field">
          <span>TTL</span>
          <input inputMode="numeric" value={ttl} onInput={(e) => setTtl(e.currentTarget.value)} />
        </label>
      </div>
      <fieldset class="permissions">
        <legend>Permissions</legend>
        {PERMISSIONS.map((p) => (
          <label key={p}>
            <input
              type="checkbox"
              checked={permissions.has(p)}
              onChange={(e) => {
                const next = new Set(permissions);
                if (e.currentTarget.checked) next.add(p);
                else next.delete(p);
                setPermissions(next);
              }}
            />{' '}
            {p}
          </label>
        ))}
      </fieldset>
      <div class="actions">
        <button type="submit" class="primary" disabled={!hasSigningKey}>
          Mint token
        </button>
      </div>
      {token && (
        <div class="token-out">
          <label class="field">
            <span>Token</span>
            <textarea readOnly rows={3} value={token} class="wrap" />
          </label>
          <CopyButton label="Copy token" text={() => token} />
        </div>
      )}
    </form>
  );
}

function DeleteBucket({ conn, onDeleted }: { conn: Connection; onDeleted: () => void }) {
  const [typed, setTyped] = useState('');
  const [error, setError] = useState<string | undefined>();
  return (
    <form
      class="card danger-zone"
      aria-labelledby="delete-bucket-title"
      onSubmit={(e) => {
        e.preventDefault();
        if (typed !== conn.bucket) return;
        deleteBucket(conn).then(onDeleted, (err: unknown) => setError(errorText(err)));
      }}
    >
      <h2 id="delete-bucket-title">Delete this bucket</h2>
      <p>Every key in it is deleted, and its credentials stop working. This cannot be undone.</p>
      <Notice error={error} />
      <div class="inline">
        <label class="field">
          <span>Type the bucket id to confirm</span>
          <input value={typed} spellcheck={false} autocomplete="off" onInput={(e) => setTyped(e.currentTarget.value)} />
        </label>
        <button type="submit" class="danger" disabled={typed !== conn.bucket}>
          Delete bucket
        </button>
      </div>
    </form>
  );
}
