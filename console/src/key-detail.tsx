import { useEffect, useRef, useState } from 'preact/hooks';
import { API_BASE, type Connection, type StoredEntry, type ValueType, addToCounter, deleteEntry, getEntry } from './api.js';
import type { Capabilities } from './capabilities.js';
import { curlCommand, formatSize, prettyJson, relativeExpiry, toBase64, toHex } from './format.js';
import { KeyHistory } from './key-history.js';
import { Badge, ConfirmDialog, CopyButton, Notice, download, errorText } from './ui.js';

const DOWNLOAD_TYPES: Record<ValueType, [string, string]> = {
  json: ['application/json', '.json'],
  text: ['text/plain', '.txt'],
  int64: ['text/plain', '.txt'],
  float64: ['text/plain', '.txt'],
  bytes: ['application/octet-stream', '.bin'],
};

/** One key: its value shown for its type, copy and download, counter buttons, edit and delete. */
export function KeyDetail(props: {
  conn: Connection;
  caps: Capabilities;
  entryKey: string;
  onEdit: () => void;
  onClose: () => void;
  onDeleted: () => void;
  onChanged: () => void;
}) {
  const { conn, caps, entryKey: key } = props;
  const [entry, setEntry] = useState<StoredEntry | undefined>();
  const [error, setError] = useState<string | undefined>();
  const [confirm, setConfirm] = useState(false);
  const heading = useRef<HTMLHeadingElement>(null);

  useEffect(() => {
    setEntry(undefined);
    setError(undefined);
    if (!caps.read) return;
    let live = true;
    getEntry(conn, key).then(
      (e) => live && setEntry(e),
      (err: unknown) => live && setError(errorText(err)),
    );
    heading.current?.focus();
    return () => {
      live = false;
    };
  }, [conn, key, caps.read]);

  const count = async (delta: number) => {
    try {
      await addToCounter(conn, key, delta);
      setEntry(await getEntry(conn, key));
      props.onChanged();
    } catch (err) {
      setError(errorText(err));
    }
  };
  const remove = async () => {
    setConfirm(false);
    try {
      await deleteEntry(conn, key);
      props.onDeleted();
    } catch (err) {
      setError(errorText(err));
    }
  };

  const text = entry && entry.type !== 'bytes' ? new TextDecoder().decode(entry.bytes) : '';
  const isNumber = entry?.type === 'int64' || entry?.type === 'float64';
  return (
    <article
      class="key-detail"
      aria-labelledby="detail-title"
      onKeyDown={(e) => {
        if (e.key === 'Escape' && !confirm) props.onClose();
      }}
    >
      <header>
        <h2 id="detail-title" tabIndex={-1} ref={heading} class="key-text">
          {key}
        </h2>
        <button type="button" class="close" onClick={props.onClose} aria-label="Close">
          ×
        </button>
      </header>
      {entry && (
        <p class="badges">
          <Badge kind={entry.type}>{entry.type}</Badge>
          <Badge>{formatSize(entry.bytes.length)}</Badge>
          <Badge kind="ttl">{entry.expiresAt === null ? 'never expires' : `expires ${relativeExpiry(entry.expiresAt, Date.now())}`}</Badge>
        </p>
      )}
      <Notice error={error} />
      {!caps.read && <p>This credential may not read values.</p>}
      <div class="actions">
        <CopyButton label="Copy key" text={() => key} />
        {entry && <CopyButton label="Copy value" text={() => (entry.type === 'bytes' ? toBase64(entry.bytes) : text)} />}
        <CopyButton label="Copy as curl" text={() => curlCommand(API_BASE, conn.bucket, key)} />
        {entry && (
          <button
            type="button"
            onClick={() => {
              const [mime, ext] = DOWNLOAD_TYPES[entry.type];
              download(key.replace(/[/\\]/g, '_') + ext, entry.bytes, mime);
            }}
          >
            Download
          </button>
        )}
        {caps.write && entry && (
          <button type="button" onClick={props.onEdit}>
            Edit
          </button>
        )}
        {caps.delete && (
          <button type="button" class="danger" onClick={() => setConfirm(true)}>
            Delete
          </button>
        )}
      </div>
      {entry && (
        <div class="value">
          {entry.type === 'json' && <pre aria-label="Value (JSON, indented for display)">{prettyJson(text)}</pre>}
          {entry.type === 'text' && <pre aria-label="Value (text)">{text}</pre>}
          {isNumber && (
            <div class="counter">
              {caps.write && (
                <button type="button" onClick={() => void count(-1)} aria-label="Subtract 1">
                  −
                </button>
              )}
              <output aria-label="Value (number)">{text}</output>
              {caps.write && (
                <button type="button" onClick={() => void count(1)} aria-label="Add 1">
                  +
                </button>
              )}
            </div>
          )}
          {entry.type === 'bytes' && (
            <>
              <h3>Hex</h3>
              <pre aria-label="Value (hex)">{toHex(entry.bytes) || '(empty)'}</pre>
              <h3>Base64</h3>
              <pre aria-label="Value (base64)" class="wrap">
                {toBase64(entry.bytes) || '(empty)'}
              </pre>
            </>
          )}
        </div>
      )}
      {entry && caps.read && (
        <KeyHistory
          conn={conn}
          caps={caps}
          entryKey={key}
          current={entry}
          onRestored={() => {
            getEntry(conn, key).then(setEntry, (err: unknown) => setError(errorText(err)));
            props.onChanged();
          }}
        />
      )}
      {confirm && (
        <ConfirmDialog title="Delete this key?" confirm="Delete" onConfirm={() => void remove()} onCancel={() => setConfirm(false)}>
          <p class="key-text">{key}</p>
        </ConfirmDialog>
      )}
    </article>
  );
}
