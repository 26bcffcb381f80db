import { useEffect, useState } from 'preact/hooks';
import { type Connection, MAX_TXN_OPS, deleteEntries, exportFileName, exportKeys } from './api.js';
import type { Capabilities } from './capabilities.js';
import { breadcrumbs } from './format.js';
import { ImportDialog } from './import-dialog.js';
import { KeyDetail } from './key-detail.js';
import { KeyEditor } from './key-editor.js';
import { KeyList } from './key-list.js';
import { ConfirmDialog, Notice, download, errorText } from './ui.js';
import { saveViewState, savedViewState } from './view-state.js';

type Open = { mode: 'view'; key: string } | { mode: 'edit'; key: string } | { mode: 'new' } | undefined;

/** Browse, view, edit and delete keys. */
export function KeysView({ conn, caps }: { conn: Connection; caps: Capabilities }) {
  // A reload or a shared link opens where the URL says, within what the credential may see.
  const [initial] = useState(() => {
    const saved = savedViewState();
    const prefix = saved.prefix?.startsWith(caps.scope) ? saved.prefix : caps.scope;
    return { prefix, live: saved.live && caps.enumerate };
  });
  const [prefix, setPrefix] = useState(initial.prefix);
  const [prefixInput, setPrefixInput] = useState(initial.prefix);
  const [folders, setFolders] = useState(true);
  const [open, setOpen] = useState<Open>(undefined);
  const [selected, setSelected] = useState<Set<string>>(new Set());
  const [confirmBulk, setConfirmBulk] = useState(false);
  const [notice, setNotice] = useState<{ error?: string; message?: string }>({});
  const [live, setLive] = useState(initial.live);
  const [importing, setImporting] = useState(false);
  const [reloads, setReloads] = useState(0);
  const reload = () => setReloads((n) => n + 1);
  // A key whose value changed: its badges are read again.
  const [changed, setChanged] = useState<{ key: string; n: number }>({ key: '', n: 0 });
  const markChanged = (key: string) => setChanged((c) => ({ key, n: c.n + 1 }));
  const close = (key: string) => {
    setOpen(undefined);
    // Back to where the user was: the key's row, when it is in view.
    requestAnimationFrame(() => document.querySelector<HTMLElement>(`.viewport button[title="${CSS.escape(key)}"]`)?.focus());
  };

  // The prefix filter follows typing after a pause.
  useEffect(() => {
    const timer = setTimeout(() => setPrefix(prefixInput), 250);
    return () => clearTimeout(timer);
  }, [prefixInput]);

  useEffect(() => saveViewState({ prefix, live }), [prefix, live]);

  const goTo = (next: string) => {
    setPrefixInput(next);
    setPrefix(next);
  };

  const deleteSelected = async () => {
    setConfirmBulk(false);
    const keys = [...selected];
    try {
      await deleteEntries(conn, keys);
      setSelected(new Set());
      setNotice({ message: `Deleted ${keys.length} keys in one transaction` });
      if (open && 'key' in open && selected.has(open.key)) setOpen(undefined);
      reload();
    } catch (err) {
      setNotice({ error: errorText(err) });
    }
  };

  const exportPrefix = async () => {
    try {
      const bytes = await exportKeys(conn, prefix);
      // Every line but the header and the end line is a key.
      const keys = new TextDecoder().decode(bytes).split('\n').filter(Boolean).length - 2;
      download(exportFileName(conn, prefix), bytes, 'application/x-ndjson');
      setNotice({ message: `Exported ${keys} ${keys === 1 ? 'key' : 'keys'}${prefix ? ` under "${prefix}"` : ''}` });
    } catch (err) {
      setNotice({ error: errorText(err) });
    }
  };

  const crumbs = breadcrumbs(prefix);
  return (
    <section class="keys" aria-label="Keys">
      <div class="toolbar">
        <label class="field prefix-field">
          <span>Prefix</span>
          <input
            type="text"
            value={prefixInput}
            placeholder={caps.scope || 'all keys'}
            spellcheck={false}
            autocomplete="off"
            onInput={(e) => setPrefixInput(e.currentTarget.value)}
          />
        </label>
        <fieldset class="segmented">
          <legend class="offscreen">View</legend>
          <label>
            <input type="radio" name="view" checked={folders} onChange={() => setFolders(true)} /> Folders
          </label>
          <label>
            <input type="radio" name="view" checked={!folders} onChange={() => setFolders(false)} /> Flat
          </label>
        </fieldset>
        {caps.write && (
          <button type="button" class="primary" onClick={() => setOpen({ mode: 'new' })}>
            New key
          </button>
        )}
        {caps.delete && selected.size > 0 && (
          <button type="button" class="danger" onClick={() => setConfirmBulk(true)} disabled={selected.size > MAX_TXN_OPS}>
            Delete selected ({selected.size})
          </button>
        )}
        <button type="button" onClick={reload}>
          Refresh
        </button>
        {caps.read && (
          <button type="button" onClick={() => void exportPrefix()}>
            Export
          </button>
        )}
        {caps.write && (
          <button type="button" onClick={() => setImporting(true)}>
            Import
          </button>
        )}
        {caps.enumerate && (
          <label class="switch">
            <input
              type="checkbox"
              role="switch"
              checked={live}
              onChange={(e) => {
                setLive(e.currentTarget.checked);
                setNotice({});
              }}
            />
            Live
          </label>
        )}
      </div>
      <nav class="crumbs" aria-label="Breadcrumbs">
        <ol>
          <li>
            <button type="button" class="link" onClick={() => goTo(caps.scope)} aria-current={prefix === caps.scope ? 'page' : undefined}>
              {caps.scope ? caps.scope : 'All keys'}
            </button>
          </li>
          {crumbs
            .filter((c) => c.prefix.length > caps.scope.length)
            .map((c) => (
              <li key={c.prefix}>
                <button type="button" class="link" onClick={() => goTo(c.prefix)} aria-current={c.prefix === prefix ? 'page' : undefined}>
                  {c.label}
                </button>
              </li>
            ))}
        </ol>
      </nav>
      <Notice {...notice} />
      <div class={`panes${open ? ' has-detail' : ''}`}>
        <KeyList
          conn={conn}
          caps={caps}
          prefix={prefix}
          folders={folders}
          reloads={reloads}
          changed={changed}
          live={live}
          onReload={reload}
          onLiveStopped={(reason) => {
            setLive(false);
            setNotice({ error: `Live updates stopped: ${reason}` });
          }}
          openKey={open && 'key' in open ? open.key : undefined}
          selected={selected}
          onSelect={(key, on) =>
            setSelected((s) => {
              const next = new Set(s);
              if (on) next.add(key);
              else next.delete(key);
              return next;
            })
          }
          onOpenKey={(key) => setOpen({ mode: 'view', key })}
          onOpenFolder={goTo}
        />
        {open && (
          <div class="detail">
            {open.mode === 'view' && (
              <KeyDetail
                conn={conn}
                caps={caps}
                entryKey={open.key}
                onEdit={() => setOpen({ mode: 'edit', key: open.key })}
                onClose={() => close(open.key)}
                onChanged={() => markChanged(open.key)}
                onDeleted={() => {
                  setNotice({ message: `Deleted ${open.key}` });
                  setOpen(undefined);
                  reload();
                }}
              />
            )}
            {(open.mode === 'edit' || open.mode === 'new') && (
              <KeyEditor
                conn={conn}
                caps={caps}
                entryKey={open.mode === 'edit' ? open.key : undefined}
                defaultKey={prefix}
                onSaved={(key, created) => {
                  setOpen({ mode: 'view', key });
                  setNotice({ message: `Saved ${key}` });
                  if (created) reload();
                  else markChanged(key);
                }}
                onTookStored={(key, exists) => {
                  setOpen(exists ? { mode: 'view', key } : undefined);
                  setNotice({ message: exists ? `Kept the stored value of ${key}` : `${key} stays deleted` });
                  if (exists) markChanged(key);
                  else reload();
                }}
                onCancel={() => setOpen(open.mode === 'edit' ? { mode: 'view', key: open.key } : undefined)}
              />
            )}
          </div>
        )}
      </div>
      {importing && (
        <ImportDialog conn={conn} prefix={prefix} mayReplace={caps.delete} onClose={() => setImporting(false)} onImported={reload} />
      )}
      {confirmBulk && (
        <ConfirmDialog
          title={`Delete ${selected.size} keys?`}
          confirm="Delete"
          onConfirm={() => void deleteSelected()}
          onCancel={() => setConfirmBulk(false)}
        >
          <p>They are deleted together in one transaction: all of them or none.</p>
          <ul class="bulk-list">
            {[...selected].slice(0, 20).map((k) => (
              <li key={k}>{k}</li>
            ))}
            {selected.size > 20 && <li>… and {selected.size - 20} more</li>}
          </ul>
        </ConfirmDialog>
      )}
    </section>
  );
}
