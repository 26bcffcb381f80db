import { useEffect, useRef, useState } from 'preact/hooks';
import { type Connection, type ImportOutcome, importKeys } from './api.js';
import { Notice, errorText } from './ui.js';

/**
 * Uploads an export file into the current prefix, with progress: merge (set every key in the
 * file) by default; replace (the prefix becomes exactly the file) only after a confirmation.
 */
export function ImportDialog(props: {
  conn: Connection;
  prefix: string;
  mayReplace: boolean;
  onClose: () => void;
  onImported: () => void;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  const [file, setFile] = useState<File | undefined>();
  const [mode, setMode] = useState<'merge' | 'replace'>('merge');
  const [confirmed, setConfirmed] = useState(false);
  const [progress, setProgress] = useState<number | undefined>();
  const [outcome, setOutcome] = useState<ImportOutcome | undefined>();
  const [error, setError] = useState<string | undefined>();
  const uploading = progress !== undefined && outcome === undefined && error === undefined;
  const where = props.prefix ? `"${props.prefix}"` : 'the whole bucket';

  useEffect(() => {
    ref.current?.showModal();
  }, []);

  const start = async (event: Event) => {
    event.preventDefault();
    if (!file) return;
    setOutcome(undefined);
    setError(undefined);
    setProgress(0);
    try {
      setOutcome(await importKeys(props.conn, props.prefix, file, mode, setProgress));
      props.onImported();
    } catch (err) {
      setError(errorText(err));
    }
  };

  return (
    <dialog
      ref={ref}
      class="confirm import"
      aria-labelledby="import-title"
      onCancel={(e) => {
        if (uploading) e.preventDefault();
        else props.onClose();
      }}
    >
      <form onSubmit={(e) => void start(e)}>
        <h2 id="import-title">Import into {where}</h2>
        <p class="help">
          A file from Export (NDJSON). It is applied all or nothing, as one revision; every key in it must be under the prefix.
        </p>
        <label class="field">
          <span>File</span>
          <input
            type="file"
            accept=".jsonl,.ndjson,application/x-ndjson"
            onChange={(e) => {
              setFile(e.currentTarget.files?.[0]);
              setOutcome(undefined);
              setError(undefined);
              setProgress(undefined);
            }}
          />
        </label>
        <fieldset class="segmented">
          <legend>Mode</legend>
          <label>
            <input type="radio" name="import-mode" checked={mode === 'merge'} onChange={() => setMode('merge')} /> Merge
          </label>
          {props.mayReplace && (
            <label>
              <input type="radio" name="import-mode" checked={mode === 'replace'} onChange={() => setMode('replace')} /> Replace
            </label>
          )}
        </fieldset>
        {mode === 'replace' && (
          <label class="check">
            <input type="checkbox" checked={confirmed} onChange={(e) => setConfirmed(e.currentTarget.checked)} /> Delete every key under{' '}
            {where} that is not in the file
          </label>
        )}
        {progress !== undefined && (
          <p class="progress">
            <progress aria-label="Upload progress" max={1} value={progress} /> {Math.round(progress * 100)}%
          </p>
        )}
        <Notice
          error={error}
          message={
            outcome &&
            `Imported ${outcome.imported} ${outcome.imported === 1 ? 'key' : 'keys'}, skipped ${outcome.skipped} (already expired)`
          }
        />
        <div class="actions">
          <button type="submit" class="primary" disabled={!file || uploading || (mode === 'replace' && !confirmed)}>
            Import
          </button>
          <button type="button" onClick={props.onClose} disabled={uploading}>
            Close
          </button>
        </div>
      </form>
    </dialog>
  );
}
