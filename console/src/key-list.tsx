import { useCallback, useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { ApiError, type Connection, type KeyMeta, type WatchEvent, keyMeta, listKeys, watchKeys } from './api.js';
import type { Capabilities } from './capabilities.js';
import { type Row, applyChange, foldRows, formatSize, relativeExpiry, removeRow, rowId, rowOf } from './format.js';
import { Badge, Notice, errorText } from './ui.js';

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
export function KeyList(props: {
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
        r.kind === 'key' && meta.current.has(r.key) && meta.current.get(r.key)!.size === undefined && !asking.current.has(r.key)
          ? [r.key]
          : [],
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
        if (caps.read)
          staleMeta(event.key, {
            type: event.value_type,
            expiresAt: event.expires_at === null ? null : Date.parse(event.expires_at),
            rev: event.rev,
          });
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
        {!state.loading && state.rows.length === 0 && !state.error && !paused && (
          <p class="empty">No keys{prefix ? ` under "${prefix}"` : ''}.</p>
        )}
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
        <input
          type="checkbox"
          aria-label={`Select ${key}`}
          checked={props.selected}
          onChange={(e) => props.onSelect(key, e.currentTarget.checked)}
        />
      )}
      <button
        type="button"
        class="row-main"
        onClick={() => props.onOpen(key)}
        aria-current={props.current ? 'true' : undefined}
        title={key}
      >
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
