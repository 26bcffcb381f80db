import { useEffect, useState } from 'preact/hooks';
import { MAX_KEY_BYTES } from '../../src/limits.js';
import { ApiError, type Connection, VALUE_TYPES, type ValueType, getEntry, setEntry } from './api.js';
import type { Capabilities } from './capabilities.js';
import { editableText, encodeValue, toBase64 } from './format.js';
import { type Conflict, ConflictDialog } from './conflict-dialog.js';
import { Notice, errorText } from './ui.js';

/**
 * Create a key, or edit one: type picker, value checked against its type before saving, TTL.
 * An edit saves with If-Match on the revision it opened, a new key with If-None-Match: *; when the
 * key changed meanwhile (412), both values are shown side by side and the user chooses.
 */
export function KeyEditor(props: {
  conn: Connection;
  caps: Capabilities;
  entryKey: string | undefined;
  defaultKey: string;
  onSaved: (key: string, created: boolean) => void;
  /** The user gave up their edit for the stored value (`exists` false: the key was deleted meanwhile). */
  onTookStored: (key: string, exists: boolean) => void;
  onCancel: () => void;
}) {
  const { conn, entryKey } = props;
  const [key, setKey] = useState(entryKey ?? props.defaultKey);
  // A new key starts as text: typing `hello` must save "hello", not fail as invalid JSON.
  const [type, setType] = useState<ValueType>('text');
  const [value, setValue] = useState('');
  const [ttl, setTtl] = useState('');
  const [error, setError] = useState<string | undefined>();
  const [valueError, setValueError] = useState<string | undefined>();
  const [loaded, setLoaded] = useState(entryKey === undefined);
  const [saving, setSaving] = useState(false);
  /** The revision the edit started from. */
  const [baseRev, setBaseRev] = useState<number | undefined>();
  const [conflict, setConflict] = useState<Conflict | undefined>();

  useEffect(() => {
    if (entryKey === undefined) return;
    getEntry(conn, entryKey).then(
      (e) => {
        setType(e.type);
        setValue(editableText(e.type, e.bytes));
        setTtl(e.expiresAt === null ? '0' : String(Math.max(1, Math.round((e.expiresAt - Date.now()) / 1000))));
        setBaseRev(e.rev);
        setLoaded(true);
      },
      (err: unknown) => setError(errorText(err)),
    );
  }, [conn, entryKey]);

  /** Saves on a condition; a failed condition opens the side-by-side choice. */
  const write = async (target: string, mine: Omit<Conflict, 'stored'>, condition: { rev: number } | { absent: true }) => {
    setSaving(true);
    try {
      await setEntry(conn, target, mine.type, mine.bytes, mine.ttl, condition);
      setConflict(undefined);
      props.onSaved(target, entryKey === undefined);
    } catch (err) {
      if (!(err instanceof ApiError && err.status === 412)) {
        setConflict(undefined);
        return setError(errorText(err));
      }
      try {
        setConflict({ ...mine, stored: await getEntry(conn, target) });
      } catch (readErr) {
        if (readErr instanceof ApiError && readErr.status === 404) setConflict({ ...mine, stored: null });
        else setError(errorText(readErr));
      }
    } finally {
      setSaving(false);
    }
  };

  const save = async (event: Event) => {
    event.preventDefault();
    setError(undefined);
    setValueError(undefined);
    const trimmedKey = key;
    if (trimmedKey === '') return setError('The key is empty');
    if (new TextEncoder().encode(trimmedKey).length > MAX_KEY_BYTES) return setError(`The key is longer than ${MAX_KEY_BYTES} bytes`);
    if (props.caps.scope && !trimmedKey.startsWith(props.caps.scope)) return setError(`The key must start with "${props.caps.scope}"`);
    const checked = encodeValue(type, value);
    if (!checked.ok) return setValueError(checked.error);
    // No size check here: the server's limit (kvb serve --max-value-bytes) may be above the spec's
    // 16 KiB, and its 400 names the limit.
    let seconds: number | undefined;
    if (ttl.trim() !== '') {
      if (!/^\d+$/.test(ttl.trim())) return setError('TTL must be a whole number of seconds');
      seconds = Number(ttl.trim());
    }
    await write(trimmedKey, { type, bytes: checked.bytes, ttl: seconds }, baseRev === undefined ? { absent: true } : { rev: baseRev });
  };

  const upload = async (file: File | undefined) => {
    if (!file) return;
    setType('bytes');
    setValue(toBase64(new Uint8Array(await file.arrayBuffer())));
  };

  return (
    <form class="key-editor" onSubmit={(e) => void save(e)} aria-labelledby="editor-title" noValidate>
      <header>
        <h2 id="editor-title">{entryKey === undefined ? 'New key' : 'Edit key'}</h2>
      </header>
      <Notice error={error} />
      <label class="field">
        <span>Key</span>
        <input
          value={key}
          readOnly={entryKey !== undefined}
          required
          spellcheck={false}
          autocomplete="off"
          onInput={(e) => setKey(e.currentTarget.value)}
        />
      </label>
      <div class="field-row">
        <label class="field">
          <span>Type</span>
          <select value={type} onChange={(e) => setType(e.currentTarget.value as ValueType)}>
            {VALUE_TYPES.map((t) => (
              <option key={t} value={t}>
                {t}
              </option>
            ))}
          </select>
        </label>
        <label class="field">
          <span>TTL</span>
          <input
            inputMode="numeric"
            value={ttl}
            placeholder="bucket default"
            aria-describedby="ttl-help"
            onInput={(e) => setTtl(e.currentTarget.value)}
          />
        </label>
      </div>
      <p id="ttl-help" class="help">
        TTL in seconds; empty means the bucket's default, 0 means never.
      </p>
      <label class="field">
        <span>Value</span>
        <textarea
          value={value}
          rows={12}
          spellcheck={false}
          aria-invalid={valueError ? 'true' : undefined}
          aria-describedby={valueError ? 'value-error' : 'value-help'}
          onInput={(e) => setValue(e.currentTarget.value)}
        />
      </label>
      {valueError ? (
        <p id="value-error" class="notice error" role="alert">
          {valueError}
        </p>
      ) : (
        <p id="value-help" class="help">
          {type === 'bytes'
            ? 'Bytes are edited as base64, or uploaded from a file.'
            : type === 'json'
              ? 'Checked as JSON before saving.'
              : ''}
        </p>
      )}
      {type === 'bytes' && (
        <label class="field">
          <span>Upload a file</span>
          <input type="file" onChange={(e) => void upload(e.currentTarget.files?.[0])} />
        </label>
      )}
      <div class="actions">
        <button type="submit" class="primary" disabled={!loaded || saving}>
          Save
        </button>
        <button type="button" onClick={props.onCancel}>
          Cancel
        </button>
      </div>
      {conflict && (
        <ConflictDialog
          entryKey={key}
          conflict={conflict}
          busy={saving}
          onKeepMine={() => void write(key, conflict, conflict.stored ? { rev: conflict.stored.rev } : { absent: true })}
          onTakeStored={() => props.onTookStored(key, conflict.stored !== null)}
          onBack={() => {
            // Back to the editor having seen the stored value: the next save replaces that one.
            setBaseRev(conflict.stored?.rev);
            setConflict(undefined);
          }}
        />
      )}
    </form>
  );
}
