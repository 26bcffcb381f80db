import { useEffect, useState } from 'preact/hooks';
import { type Connection, type HistoryItem, type StoredEntry, getEntryAt, keyHistory, setEntry } from './api.js';
import type { Capabilities } from './capabilities.js';
import { actorLabel, formatSize, prettyJson, toBase64 } from './format.js';
import { lineDiff } from './line-diff.js';
import { Notice, errorText } from './ui.js';

/** A value as a diff compares it: JSON indented, bytes as base64, the rest as its text. */
function diffText(entry: StoredEntry): string {
  if (entry.type === 'bytes') return toBase64(entry.bytes);
  const text = new TextDecoder().decode(entry.bytes);
  return entry.type === 'json' ? prettyJson(text) : text;
}

/** " · by WHO" for a version whose actor is recorded. */
function by(item: HistoryItem): string {
  const label = actorLabel(item.actor);
  return label ? ` · by ${label}` : '';
}

/**
 * A key's history beside its value: its recorded changes, newest first, loaded when
 * asked for; a version shows a line diff against the current value and can be restored, which
 * writes it back with If-Match on the current revision (a change made meanwhile is refused).
 */
export function KeyHistory(props: {
  conn: Connection;
  caps: Capabilities;
  entryKey: string;
  current: StoredEntry;
  onRestored: () => void;
}) {
  const { conn, caps, entryKey: key, current } = props;
  const [items, setItems] = useState<HistoryItem[] | undefined>();
  const [open, setOpen] = useState(false);
  const [chosen, setChosen] = useState<StoredEntry | undefined>();
  const [error, setError] = useState<string | undefined>();
  const [message, setMessage] = useState<string | undefined>();

  useEffect(() => {
    setItems(undefined);
    setChosen(undefined);
    setError(undefined);
    if (!open) return;
    let live = true;
    keyHistory(conn, key).then(
      (list) => live && setItems(list),
      (err: unknown) => live && setError(errorText(err)),
    );
    return () => {
      live = false;
    };
  }, [conn, key, open, current.rev]);

  const choose = async (item: HistoryItem) => {
    setError(undefined);
    setMessage(undefined);
    try {
      setChosen(await getEntryAt(conn, key, item.rev));
    } catch (err) {
      setError(errorText(err));
    }
  };
  const restore = async (version: StoredEntry) => {
    setError(undefined);
    try {
      const ttl = version.expiresAt === null ? 0 : Math.ceil((version.expiresAt - Date.now()) / 1000);
      if (ttl < 0) throw new Error('This version has expired since; it cannot be restored.');
      await setEntry(conn, key, version.type, version.bytes, ttl, { rev: current.rev });
      setMessage(`Restored the version of revision ${version.rev}.`);
      props.onRestored();
    } catch (err) {
      setError(errorText(err));
    }
  };

  if (!open) {
    return (
      <section class="history" aria-label="History">
        <button type="button" onClick={() => setOpen(true)}>
          Show history
        </button>
      </section>
    );
  }
  return (
    <section class="history" aria-labelledby="history-title">
      <h3 id="history-title">History</h3>
      <Notice error={error} message={message} />
      {items === undefined && !error && <p>Loading…</p>}
      {items && (
        <ol class="history-list" aria-label="Versions, newest first">
          {items.map((item) => (
            <li key={item.rev}>
              {item.type === null ? (
                <span>
                  rev {item.rev} · {item.operation} · {new Date(item.time).toLocaleString()} · absent{by(item)}
                </span>
              ) : (
                <button type="button" aria-pressed={chosen?.rev === item.rev} onClick={() => void choose(item)}>
                  rev {item.rev} · {item.operation} · {new Date(item.time).toLocaleString()} · {item.type} · {formatSize(item.size ?? 0)}
                  {by(item)}
                  {item.rev === current.rev ? ' (current)' : ''}
                </button>
              )}
            </li>
          ))}
        </ol>
      )}
      {chosen && (
        <div class="history-version">
          <h4>Revision {chosen.rev} against the current value</h4>
          <pre class="diff" aria-label={`Changes from revision ${chosen.rev} to the current value`}>
            {lineDiff(diffText(chosen), diffText(current)).map((line, i) => (
              <span key={i} class={line.op === '+' ? 'added' : line.op === '-' ? 'removed' : undefined}>
                {`${line.op} ${line.text}\n`}
              </span>
            ))}
          </pre>
          {caps.write && chosen.rev !== current.rev && (
            <button type="button" onClick={() => void restore(chosen)}>
              Restore this version
            </button>
          )}
        </div>
      )}
    </section>
  );
}
