import { useEffect, useRef } from 'preact/hooks';
import type { StoredEntry, ValueType } from './api.js';
import { editableText, prettyJson } from './format.js';

/** What the user tried to save when the key had changed: theirs, and what is stored now (null: the key is gone). */
export interface Conflict {
  type: ValueType;
  bytes: Uint8Array;
  ttl: number | undefined;
  stored: StoredEntry | null;
}

/** A value as text for the side-by-side view: JSON indented, bytes as base64. */
const shownValue = (type: ValueType, bytes: Uint8Array) =>
  type === 'json' ? prettyJson(editableText(type, bytes)) : editableText(type, bytes);

/** The key changed since the editor opened it: the stored value beside the user's, and the choice. */
export function ConflictDialog(props: {
  entryKey: string;
  conflict: Conflict;
  busy: boolean;
  onKeepMine: () => void;
  onTakeStored: () => void;
  onBack: () => void;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    ref.current?.showModal();
  }, []);
  const { stored } = props.conflict;
  return (
    <dialog ref={ref} class="confirm conflict" aria-labelledby="conflict-title" aria-describedby="conflict-help" onCancel={props.onBack}>
      <h2 id="conflict-title">{stored ? 'This key changed while you edited it' : 'This key was deleted while you edited it'}</h2>
      <p id="conflict-help">
        <span class="key-text">{props.entryKey}</span>: nothing was saved. Keep your value (it replaces the stored one), or take the stored
        one and drop your edit.
      </p>
      <div class="side-by-side">
        <section aria-labelledby="conflict-stored">
          <h3 id="conflict-stored">Stored now{stored ? ` (revision ${stored.rev}, ${stored.type})` : ''}</h3>
          <pre aria-label="Stored value" tabIndex={0}>
            {stored ? shownValue(stored.type, stored.bytes) : '(deleted)'}
          </pre>
        </section>
        <section aria-labelledby="conflict-mine">
          <h3 id="conflict-mine">Yours ({props.conflict.type})</h3>
          <pre aria-label="Your value" tabIndex={0}>
            {shownValue(props.conflict.type, props.conflict.bytes)}
          </pre>
        </section>
      </div>
      <div class="actions">
        <button type="button" class="primary" onClick={props.onKeepMine} disabled={props.busy}>
          Keep mine
        </button>
        <button type="button" onClick={props.onTakeStored} disabled={props.busy}>
          {stored ? 'Take stored' : 'Keep it deleted'}
        </button>
        <button type="button" onClick={props.onBack}>
          Back to editing
        </button>
      </div>
    </dialog>
  );
}
