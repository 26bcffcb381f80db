import { useCallback, useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import {
  API_BASE,
  ApiError,
  type Connection,
  type KeyMeta,
  MAX_TXN_OPS,
  type StoredEntry,
  VALUE_TYPES,
  type ValueType,
  type WatchEvent,
  addToCounter,
  deleteEntries,
  deleteEntry,
  exportFileName,
  exportKeys,
  getEntry,
  keyMeta,
  listKeys,
  setEntry,
  watchKeys,
} from './api.js';
import type { Capabilities } from './capabilities.js';
import {
  type Row,
  applyChange,
  breadcrumbs,
  curlCommand,
  editableText,
  encodeValue,
  foldRows,
  formatSize,
  prettyJson,
  relativeExpiry,
  removeRow,
  rowId,
  rowOf,
  toBase64,
  toHex,
} from './format.js';
import { ImportDialog } from './import-dialog.js';
import { KeyHistory } from './key-history.js';
import { Badge, ConfirmDialog, CopyButton, Notice, download, errorText } from './ui.js';

/**
 * Rows have a fixed height, so the list places any row without measuring: a key wraps to three
 * lines beside its badges, or on a phone to four lines above them (128 bytes fit either way).
 */
const ROW_HEIGHTS = { wide: 44, narrow: 84 };
const NARROW = '(max-width: 720px)';

function useRowHeight(): number {
  const [narrow, setNarrow] = useState(() => matchMedia(NARROW).matches);
  useEffect(() => {
    const query = matchMedia(NARROW);
    const changed = () => setNarrow(query.matches);
    query.addEventListener('change', changed);
    return () => query.removeEventListener('change', changed);
  }, []);
  return narrow ? ROW_HEIGHTS.narrow : ROW_HEIGHTS.wide;
}
/** Rows rendered beyond the visible ones, above and below. */
const OVERSCAN = 10;
/** Keys per listing request (a folder view folds many keys into few rows, so it asks for more). */
const PAGE_KEYS = { flat: 500, folders: 1000 };
/** Load the next page when fewer than this many rows are left below the viewport. */
const PREFETCH_ROWS = 60;
/**
 * Pages read in a row without the user scrolling. A folder view of a huge prefix can fold many
 * pages into a few rows; past this it waits to be asked, rather than reading the bucket.
 */
const MAX_UNASKED_PAGES = 8;

/** A row's badges: from the listing, or (a live change) type and expiry at once and the size read after. */
type Meta = Omit<KeyMeta, 'size'> & { size: number | undefined };
/** How long a row changed by the live feed stays highlighted. */
const HIGHLIGHT_MS = 3000;
/** The longest wait between reconnection attempts of the live feed. */
const MAX_RECONNECT_MS = 10_000;
/** How long after a key in a folder is removed the folder is checked for emptiness (a burst of deletes: one check). */
const FOLDER_CHECK_MS = 300;

type Open = { mode: 'view'; key: string } | { mode: 'edit'; key: string } | { mode: 'new' } | undefined;

/** Browse, view, edit and delete keys. */
export function KeysView({ conn, caps }: { conn: Connection; caps: Capabilities }) {
  const [prefix, setPrefix] = useState(caps.scope);
  const [prefixInput, setPrefixInput] = useState(caps.scope);
  const [folders, setFolders] = useState(true);
  const [open, setOpen] = useState<Open>(undefined);
  const [selected, setSelected] = useState<Set<string>>(new Set());
  const [confirmBulk, setConfirmBulk] = useState(false);
  const [notice, setNotice] = useState<{ error?: string; message?: string }>({});
  const [live, setLive] = useState(false);
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
        <ImportDialog
          conn={conn}
          prefix={prefix}
          mayReplace={caps.delete}
          onClose={() => setImporting(false)}
          onImported={reload}
        />
      )}
      {confirmBulk && (
        <ConfirmDialog title={`Delete ${selected.size} keys?`} confirm="Delete" onConfirm={() => void deleteSelected()} onCancel={() => setConfirmBulk(false)}>
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

interface ListState {
  rows: Row[];
  /** Where the next page starts; undefined when every page is loaded. */
  next: string | undefined;
  loading: boolean;
  error?: string;
  /** The listing these rows belong to: a page is only ever appended to rows of its own listing. */
  gen: number;
}

/** The key list: renders only the rows in view, and loads pages as the user scrolls towards the end. */
function KeyList(props: {
  conn: Connection;
  caps: Capabilities;
  prefix: string;
  folders: boolean;
  reloads: number;
  changed: { key: string; n: number };
  live: boolean;
  onReload: () => void;
  onLiveStopped: (reason: string) => void;
  openKey: string | undefined;
  selected: Set<string>;
  onSelect: (key: string, on: boolean) => void;
  onOpenKey: (key: string) => void;
  onOpenFolder: (prefix: string) => void;
}) {
  const { conn, caps, prefix, folders } = props;
  const ROW_HEIGHT = useRowHeight();
  const [state, setState] = useState<ListState>({ rows: [], next: '', loading: false, gen: 0 });
  const [scrollTop, setScrollTop] = useState(0);
  const [height, setHeight] = useState(600);
  const viewport = useRef<HTMLDivElement>(null);
  const generation = useRef(0);
  const unasked = useRef(0);
  const [paused, setPaused] = useState(false);
  // Badges come with the listing's pages (meta=true) when the credential may read values.
  const meta = useRef(new Map<string, Meta>());
  const [metaVersion, setMetaVersion] = useState(0);
  /** The bucket revision of the current listing's first page: the live feed starts after it. */
  const [listedAt, setListedAt] = useState<{ gen: number; rev: number } | undefined>();
  /** Rows the live feed changed a moment ago (highlighted). */
  const [flashed, setFlashed] = useState<ReadonlySet<string>>(new Set());
  /** Keys whose metadata is being read (asked once at a time). */
  const asking = useRef(new Set<string>());
  /** The latest props, for the live feed's callbacks (the feed outlives renders). */
  const latest = useRef({ props });
  latest.current = { props };

  const loadPage = useCallback(
    async (from: string | undefined, previous: Row[], gen: number) => {
      setState((s) => ({ ...s, loading: true }));
      try {
        const page = await listKeys(conn, prefix, from, folders ? PAGE_KEYS.folders : PAGE_KEYS.flat, caps.read, folders ? '/' : undefined);
        if (gen !== generation.current) return;
        for (const [key, m] of page.metas) meta.current.set(key, m);
        if (from === undefined) setListedAt({ gen, rev: page.revision });
        // The server folded the folders (one seek past each); an older server sent every key.
        const rows = page.folders
          ? page.keys.map((key): Row => (page.folders!.has(key) ? rowOf(key, prefix, true) : { kind: 'key', key }))
          : foldRows(page.keys, prefix, folders, previous[previous.length - 1]);
        setState({ rows: previous.concat(rows), next: page.next, loading: false, gen });
      } catch (err) {
        if (gen === generation.current) setState((s) => ({ ...s, loading: false, next: undefined, error: errorText(err) }));
      }
    },
    [conn, prefix, folders, caps.read],
  );

  // A new prefix, view or reload starts again from the first page.
  useEffect(() => {
    const gen = ++generation.current;
    unasked.current = 0;
    setPaused(false);
    meta.current.clear();
    viewport.current?.scrollTo({ top: 0 });
    setScrollTop(0);
    setListedAt(undefined);
    setState({ rows: [], next: undefined, loading: true, gen });
    if (caps.enumerate) void loadPage(undefined, [], gen);
  }, [loadPage, props.reloads, caps.enumerate]);

  useLayoutEffect(() => {
    const element = viewport.current;
    if (!element) return;
    const observer = new ResizeObserver(() => setHeight(element.clientHeight));
    observer.observe(element);
    setHeight(element.clientHeight);
    return () => observer.disconnect();
  }, []);

  const first = Math.max(0, Math.floor(scrollTop / ROW_HEIGHT) - OVERSCAN);
  const last = Math.min(state.rows.length, Math.ceil((scrollTop + height) / ROW_HEIGHT) + OVERSCAN);

  /** A key's badges are out of date: its size is read again (when in view); type and expiry when known now. */
  const staleMeta = useCallback((key: string, known?: Omit<Meta, 'size'>) => {
    const previous = meta.current.get(key);
    if (known) meta.current.set(key, { ...known, size: undefined });
    else if (previous) meta.current.set(key, { ...previous, size: undefined });
    else meta.current.set(key, { type: 'bytes', expiresAt: null, rev: 0, size: undefined });
    setMetaVersion((v) => v + 1);
  }, []);

  useEffect(() => {
    if (props.changed.key && caps.read) staleMeta(props.changed.key);
  }, [props.changed, caps.read, staleMeta]);

  // Badges of rows in view that a change made stale: one metadata read each (never the value).
  useEffect(() => {
    if (!caps.read) return;
    const gen = generation.current;
    const keys = state.rows
      .slice(first, last)
      .flatMap((r) =>
        r.kind === 'key' && meta.current.has(r.key) && meta.current.get(r.key)!.size === undefined && !asking.current.has(r.key) ? [r.key] : [],
      );
    if (keys.length === 0) return;
    const timer = setTimeout(() => {
      for (const key of keys) {
        asking.current.add(key);
        keyMeta(conn, key).then(
          (m) => {
            asking.current.delete(key);
            if (gen !== generation.current) return;
            if (m) meta.current.set(key, m);
            else meta.current.delete(key);
            setMetaVersion((v) => v + 1);
          },
          () => {
            asking.current.delete(key);
            // No badges for this key until the next listing; not asked again.
            if (gen === generation.current) meta.current.delete(key);
          },
        );
      }
    }, 150);
    return () => clearTimeout(timer);
  }, [first, last, state.rows, caps.read, conn, metaVersion]);

  // Near the end of what is loaded: the next page.
  const loadMore = () => {
    unasked.current = 0;
    setPaused(false);
  };
  useEffect(() => {
    // Rows of the previous listing (a new prefix's first page is not in yet) are never continued.
    if (state.gen !== generation.current) return;
    if (state.loading || state.next === undefined || last + PREFETCH_ROWS <= state.rows.length) return;
    if (unasked.current >= MAX_UNASKED_PAGES) return setPaused(true);
    unasked.current++;
    void loadPage(state.next, state.rows, generation.current);
  }, [last, state, loadPage, paused]);

  // Live: the watch feed of this prefix from the listing's revision, so no change between the
  // listing and the feed is missed. A dropped connection resumes after the last whole revision.
  useEffect(() => {
    if (!props.live || !listedAt || listedAt.gen !== generation.current) return;
    const gen = listedAt.gen;
    const controller = new AbortController();
    /** Revisions up to this one are received whole (a transaction's lines share one revision). */
    let complete = listedAt.rev;
    let seen = listedAt.rev;
    let finished = false;
    let delay = 500;
    const flash = (id: string) => {
      setFlashed((s) => new Set(s).add(id));
      setTimeout(() => {
        setFlashed((s) => {
          const next = new Set(s);
          next.delete(id);
          return next;
        });
      }, HIGHLIGHT_MS);
    };
    /** Per folder: the revision of the last write into it that the feed reported. */
    const folderWrites = new Map<string, number>();
    const folderChecks = new Map<string, ReturnType<typeof setTimeout>>();
    /**
     * A key in a folder was removed: the folder row goes too if nothing is left in it. A one-key
     * listing tells, unless a write into the folder came after the revision it read at.
     */
    const checkFolder = (folder: string) => {
      clearTimeout(folderChecks.get(folder));
      folderChecks.set(
        folder,
        setTimeout(() => {
          folderChecks.delete(folder);
          listKeys(conn, folder, undefined, 1).then(
            (page) => {
              if (gen !== generation.current || page.keys.length > 0 || (folderWrites.get(folder) ?? 0) > page.revision) return;
              setState((s) => (s.gen !== gen ? s : { ...s, rows: removeRow(s.rows, folder) }));
            },
            () => {}, // the row stays, as it did before the check
          );
        }, FOLDER_CHECK_MS),
      );
    };
    const onEvent = (event: WatchEvent) => {
      if (gen !== generation.current) return;
      delay = 500;
      if (event.type === 'closed') {
        finished = true;
        latest.current.props.onLiveStopped(event.reason);
        return;
      }
      if (event.type === 'reset') {
        // The feed cannot replay what happened (an import, or too far behind): list again.
        finished = true;
        latest.current.props.onReload();
        return;
      }
      if (event.rev > seen) {
        complete = seen;
        seen = event.rev;
      }
      if (event.type === 'sync' || event.type === 'progress') {
        complete = event.rev;
        return;
      }
      const change = event.type === 'set' ? 'set' : 'delete';
      setState((s) => {
        if (s.gen !== gen) return s;
        const rows = applyChange(s.rows, event.key, change, prefix, folders, s.next === undefined);
        return rows === s.rows ? s : { ...s, rows };
      });
      const changed = rowOf(event.key, prefix, folders);
      if (changed.kind === 'folder') {
        if (event.type === 'set') folderWrites.set(changed.prefix, event.rev);
        else checkFolder(changed.prefix);
      }
      if (event.type === 'set') {
        if (caps.read) staleMeta(event.key, { type: event.value_type, expiresAt: event.expires_at === null ? null : Date.parse(event.expires_at), rev: event.rev });
        flash(rowId(rowOf(event.key, prefix, folders)));
      } else {
        meta.current.delete(event.key);
      }
    };
    const follow = async () => {
      while (!controller.signal.aborted && !finished) {
        try {
          await watchKeys(conn, prefix, complete, onEvent, controller.signal);
        } catch (err) {
          if (controller.signal.aborted) return;
          // Refused (the credential, the bucket): retrying will not help.
          if (err instanceof ApiError && err.status >= 400 && err.status < 500 && err.status !== 429) {
            latest.current.props.onLiveStopped(errorText(err));
            return;
          }
        }
        if (finished || controller.signal.aborted) return;
        await new Promise((resume) => setTimeout(resume, delay));
        delay = Math.min(delay * 2, MAX_RECONNECT_MS);
      }
    };
    const unload = () => controller.abort();
    addEventListener('pagehide', unload);
    void follow();
    return () => {
      controller.abort();
      for (const timer of folderChecks.values()) clearTimeout(timer);
      removeEventListener('pagehide', unload);
    };
  }, [props.live, listedAt, conn, prefix, folders, caps.read, staleMeta]);

  if (!caps.enumerate) {
    return (
      <div class="list-pane">
        <p class="empty">This credential may not list keys.</p>
      </div>
    );
  }

  const now = Date.now();
  const under = prefix ? ` under "${prefix}"` : '';
  const summary = state.error
    ? ''
    : state.loading && state.rows.length === 0
      ? 'Loading…'
      : state.next === undefined && !state.loading
        ? `${state.rows.length} ${state.rows.length === 1 ? 'row' : 'rows'}${under}`
        : `${state.rows.length}+ rows${under}, more as you scroll`;
  return (
    <div class="list-pane">
      <p class="list-summary" role="status">
        {summary}
        {props.live && <span class="live-on"> · live</span>}
      </p>
      {state.error && <Notice error={state.error} />}
      <div
        class="viewport"
        ref={viewport}
        onScroll={(e) => {
          unasked.current = 0;
          setScrollTop(e.currentTarget.scrollTop);
        }}
      >
        <div class="spacer" style={{ height: `${state.rows.length * ROW_HEIGHT}px` }}>
          <ul class="rows" aria-label="Keys in view" style={{ transform: `translateY(${first * ROW_HEIGHT}px)` }}>
            {state.rows.slice(first, last).map((row, i) =>
              row.kind === 'folder' ? (
                <li key={`f:${row.prefix}`} class={`row folder${flashed.has(row.prefix) ? ' changed' : ''}`} aria-posinset={first + i + 1}>
                  <button type="button" class="row-main" onClick={() => props.onOpenFolder(row.prefix)}>
                    <span class="icon" aria-hidden="true">
                      ▸
                    </span>
                    <span class="key-text">{row.name}</span>
                  </button>
                </li>
              ) : (
                <KeyRow
                  key={`k:${row.key}`}
                  entryKey={row.key}
                  meta={meta.current.get(row.key)}
                  now={now}
                  canDelete={caps.delete}
                  current={row.key === props.openKey}
                  changed={flashed.has(row.key)}
                  selected={props.selected.has(row.key)}
                  onSelect={props.onSelect}
                  onOpen={props.onOpenKey}
                />
              ),
            )}
          </ul>
        </div>
        {!state.loading && state.rows.length === 0 && !state.error && !paused && <p class="empty">No keys{prefix ? ` under "${prefix}"` : ''}.</p>}
      </div>
      {paused && state.next !== undefined && (
        <p class="paused">
          Read {MAX_UNASKED_PAGES} pages of keys for these rows.{' '}
          <button type="button" onClick={loadMore}>
            Read more keys
          </button>
        </p>
      )}
    </div>
  );
}

function KeyRow(props: {
  entryKey: string;
  meta: Meta | undefined;
  now: number;
  canDelete: boolean;
  current: boolean;
  changed: boolean;
  selected: boolean;
  onSelect: (key: string, on: boolean) => void;
  onOpen: (key: string) => void;
}) {
  const { entryKey: key, meta } = props;
  return (
    <li class={`row${props.current ? ' current' : ''}${props.changed ? ' changed' : ''}`}>
      {props.canDelete && (
        <input type="checkbox" aria-label={`Select ${key}`} checked={props.selected} onChange={(e) => props.onSelect(key, e.currentTarget.checked)} />
      )}
      <button type="button" class="row-main" onClick={() => props.onOpen(key)} aria-current={props.current ? 'true' : undefined} title={key}>
        <span class="key-text">{key}</span>
      </button>
      {meta && meta.size !== undefined && (
        <span class="badges">
          <Badge kind={meta.type}>{meta.type}</Badge>
          <Badge>{formatSize(meta.size)}</Badge>
          {meta.expiresAt !== null && <Badge kind="ttl">{relativeExpiry(meta.expiresAt, props.now)}</Badge>}
        </span>
      )}
    </li>
  );
}

const DOWNLOAD_TYPES: Record<ValueType, [string, string]> = {
  json: ['application/json', '.json'],
  text: ['text/plain', '.txt'],
  int64: ['text/plain', '.txt'],
  float64: ['text/plain', '.txt'],
  bytes: ['application/octet-stream', '.bin'],
};

/** One key: its value shown for its type, copy and download, counter buttons, edit and delete. */
function KeyDetail(props: {
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

/** What the user tried to save when the key had changed: theirs, and what is stored now (null: the key is gone). */
interface Conflict {
  type: ValueType;
  bytes: Uint8Array;
  ttl: number | undefined;
  stored: StoredEntry | null;
}

/**
 * Create a key, or edit one: type picker, value checked against its type before saving, TTL.
 * An edit saves with If-Match on the revision it opened, a new key with If-None-Match: *; when the
 * key changed meanwhile (412), both values are shown side by side and the user chooses.
 */
function KeyEditor(props: {
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
  const [type, setType] = useState<ValueType>('json');
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
    if (new TextEncoder().encode(trimmedKey).length > 128) return setError('The key is longer than 128 bytes');
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
        <input value={key} readOnly={entryKey !== undefined} required spellcheck={false} autocomplete="off" onInput={(e) => setKey(e.currentTarget.value)} />
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
          <input inputMode="numeric" value={ttl} placeholder="bucket default" aria-describedby="ttl-help" onInput={(e) => setTtl(e.currentTarget.value)} />
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
          {type === 'bytes' ? 'Bytes are edited as base64, or uploaded from a file.' : type === 'json' ? 'Checked as JSON before saving.' : ''}
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

/** A value as text for the side-by-side view: JSON indented, bytes as base64. */
const shownValue = (type: ValueType, bytes: Uint8Array) => (type === 'json' ? prettyJson(editableText(type, bytes)) : editableText(type, bytes));

/** The key changed since the editor opened it: the stored value beside the user's, and the choice. */
function ConflictDialog(props: {
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
        <span class="key-text">{props.entryKey}</span>: nothing was saved. Keep your value (it replaces the stored one), or take the stored one and
        drop your edit.
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
