import type { BucketRecord } from './bucket-columns.js';
import type { Usage } from './quota.js';
import type { Actor, ActorFilter, BucketLogQuery, ChangeLogBounds, HistoryRecord, LoggedKeyChange, PastRead } from './history-types.js';
import type { StoredValue } from '../values/stored-value.js';
import type { Entry, EntryMeta, NewEntry, Written } from './core/write-types.js';
import type { ResultOf, WriteOp } from './core/write-ops.js';
import type { WebhookStore } from './webhook-types.js';
import type { ChangeKind } from '../values/change-kind.js';

export {
  type CommitOutcome,
  type Condition,
  type Deleted,
  type Entry,
  type EntryMeta,
  type NewEntry,
  type OpResult,
  type ReadingOp,
  type Refusal,
  type TxnOp,
  type TxnRequestOp,
  type Written,
  isRefusal,
} from './core/write-types.js';

/** A bucket as stored (its columns are declared once, in bucket-columns.ts). */
export type { BucketRecord } from './bucket-columns.js';

/** Fields a PATCH may change; absent fields are left alone. */
export interface BucketChanges {
  secretKeyHash?: string;
  readKeyHash?: string | null;
  writeKeyHash?: string | null;
  /** Setting (even to the same value) or clearing the signing key bumps the generation. */
  signingKey?: string | null;
  /** Set together with a new signing key: each signing key gets a fresh salt. */
  tokenSalt?: string;
  defaultTtl?: number;
}

/**
 * What a listing reads per key: the key only, its metadata without the value (type, size,
 * expiry, revision), or the whole entry.
 */
export type ListColumns = 'keys' | 'meta' | 'values';

export interface ListQuery {
  prefix: string;
  reverse: boolean;
  columns: ListColumns;
  /** Rows to skip before the first returned row. */
  offset: number;
  limit: number;
  /** Continue after this key (exclusive), in the listing's order. */
  after?: string;
}

export interface ListedEntry {
  key: string;
  /** With columns 'values'. */
  entry?: Entry;
  /** With columns 'meta'. */
  meta?: EntryMeta;
}

/**
 * One live entry as exported (with its revisions), or as staged by an import (a restore keeps its
 * revision and create revision; a create revision not given is the revision).
 */
export interface KeyedEntry {
  key: string;
  entry: NewEntry & { revision?: number; createRevision?: number };
}

/**
 * A consistent, read-only view of one bucket's live entries under a prefix, as of when it was
 * opened, read in key order at the reader's pace. Must be closed.
 */
export interface EntrySnapshot {
  /** The bucket's revision in this snapshot. */
  readonly revision: number;
  /** Up to `max` next entries (each with its revision); empty once the snapshot is exhausted. */
  read(max: number): Promise<Array<{ key: string; entry: Entry }>>;
  close(): Promise<void>;
}

/**
 * An import being staged outside the bucket: nothing is visible until `apply`, which writes it all
 * in one transaction. A later entry for the same key replaces an earlier one. `abort` or `apply`
 * must be called once.
 */
export interface ImportStaging {
  add(entries: KeyedEntry[]): Promise<void>;
  /**
   * Commits the staged entries as ONE revision of the bucket: the bucket revision goes up by one
   * and every staged entry carries it. `replace`: every key under `prefix` not in the import is
   * deleted, in the same transaction. `restoreRevision` (a restore): entries keep their staged
   * revisions and the bucket's revision is set to this value instead. A bucket deleted meanwhile:
   * nothing is written.
   */
  apply(options: {
    replace: boolean;
    prefix: string;
    restoreRevision?: number;
    actor?: Actor;
  }): Promise<Written | { refused: 'no_bucket' }>;
  abort(): Promise<void>;
}

/** Counts a store keeps in plain fields; the metrics endpoint reads them when scraped. */
export interface StoreStats {
  /** Expired keys removed by sweepExpired. */
  sweptKeys: number;
  /** Entry-cache lookups answered from memory / from the database (stores with an entry cache only). */
  cacheHits: number;
  cacheMisses: number;
}

/** A connection pool's state at this moment (PostgreSQL). */
export interface PoolStats {
  total: number;
  idle: number;
  waiting: number;
}

/** One key's change in the watch feed's log: the key's state after its revision committed. */
export interface Change {
  revision: number;
  key: string;
  kind: ChangeKind;
  /** For `set`: the value and expiry it wrote. */
  value?: StoredValue;
  expiresAt: number | null;
}

/** Where a bucket's change log starts: `floor` is the newest revision no longer in it; `revision` is the bucket's. */
export type { ChangeLogBounds } from './history-types.js';

/** What a store is and offers, read once (at start-up, by metrics, by `kvb db`); never changes. */
export interface StoreFlags {
  readonly backend: 'sqlite' | 'postgres';
  /** True when several server instances may share this store, so caches must expire on their own. */
  readonly shared: boolean;
  /** One line for the start-up log: what the database offers and what kvb uses of it. */
  readonly capabilities: string;
  /** Whether this store has an entry cache (whose hits and misses `stats` counts). */
  readonly cachesEntries: boolean;
}

/** The buckets: their records, revisions and usage. */
export interface BucketStore {
  create(bucket: BucketRecord): Promise<void>;
  get(id: string): Promise<BucketRecord | undefined>;
  update(id: string, changes: BucketChanges): Promise<boolean>;
  /** Deletes the bucket and all its keys. */
  delete(id: string): Promise<boolean>;
  /** Up to `limit` buckets with ids after `after`, in id order (for a dump). */
  list(after: string | undefined, limit: number): Promise<BucketRecord[]>;
  /** How many buckets exist (for `--max-buckets`). */
  count(): Promise<number>;
  /** The bucket's revision: every committed change to it adds one. Undefined when there is no such bucket. */
  revision(bucket: string): Promise<number | undefined>;
  /** A bucket's usage (keys, bytes), kept exact by every write; undefined when there is no such bucket. */
  usage(bucket: string): Promise<Usage | undefined>;
}

/**
 * History (history-reader.ts): the change log read as of a past revision. Each read says when the
 * revision is below the bucket's floor or beyond its revision.
 */
export interface HistoryReads {
  readAt(bucket: string, key: string, revision: number): Promise<PastRead<Entry | undefined>>;
  listAt(bucket: string, query: ListQuery, revision: number): Promise<PastRead<ListedEntry[]>>;
  /** Up to `limit` of a key's recorded changes before revision `before`, newest first; only `actor`'s when given. */
  keyHistory(bucket: string, key: string, before: number, limit: number, actor?: ActorFilter): Promise<HistoryRecord[]>;
  /** Up to `query.limit` changes of the bucket (or of a prefix) in revision order, then key order. */
  bucketLog(bucket: string, query: BucketLogQuery): Promise<LoggedKeyChange[]>;
}

/**
 * The watch feed. Every committed change writes its log rows in its own transaction (one row per
 * changed key, the final state).
 */
export interface ChangeFeed {
  /** Whole revisions after `after` and up to `upTo`, in order. */
  read(bucket: string, after: number, upTo: number, limit: number): Promise<Change[]>;
  bounds(bucket: string): Promise<ChangeLogBounds | undefined>;
  /**
   * Raises each bucket's floor to its newest change committed before `before` (ms) and compacts
   * the log up to it (history-statements.ts `compactChanges`): the state at the floor stays
   * readable. Returns how many buckets.
   */
  prune(before: number, batch: number): Promise<number>;
  /**
   * Holds each bucket's history above its floor (the bytes of its change rows' keys and values)
   * to `maxBytes` (0: no bound): a bucket written since the last call that holds more gets its
   * floor raised past its oldest revisions and its log compacted, as `prune` does. Returns how
   * many buckets.
   */
  bound(maxBytes: number, now: number): Promise<number>;
  /**
   * Called after each commit with the buckets it changed (a store that only this process writes
   * to), and the changes it committed to the buckets `watch` names, when it has them.
   */
  onCommit?(listener: (buckets: string[], committed?: readonly CommittedChanges[]) => void): void;
  /**
   * Until the returned function is called, commits hand `onCommit`'s listeners this bucket's
   * changes (not every commit's: one that changed the bucket without change records, an import,
   * is left to be read from the log). Only a store with `onCommit`.
   */
  watch?(bucket: string): () => void;
}

/** One commit's changes to a watched bucket: its revision before them (`from`) and after (`revision`), and them, in the log's order. */
export interface CommittedChanges {
  bucket: string;
  from: number;
  revision: number;
  changes: Change[];
}

/** Whole-store work: the sweeper's, the metrics endpoint's and `kvb db check`'s. */
export interface Maintenance {
  /** Deletes up to `batch` expired keys (one revision per bucket touched, recorded as SERVER_ACTOR's); returns how many. */
  sweepExpired(now: number, batch: number): Promise<number>;
  /** Problems found by an integrity check (empty when none): storage checks and entries without a bucket. */
  checkIntegrity(): Promise<string[]>;
  countEntries(): Promise<number>;
}

/**
 * The storage seam. The HTTP server depends on this interface only; SQLite and PostgreSQL
 * each implement it. `now` is passed in (ms) so expiry is decided in one place per request.
 */
export interface Store {
  readonly flags: StoreFlags;
  /** Running counts, read at scrape time. */
  readonly stats: StoreStats;
  /** The connection pool's state, for stores that have one. */
  poolStats?(): PoolStats;
  readonly buckets: BucketStore;

  /**
   * The one write entry point: a set, delete, counter or transaction (core/write-ops.ts). Each
   * bumps its bucket's revision by one in its own database transaction, and checks its
   * condition(s) in that same transaction; a refused write changes nothing. A transaction
   * evaluates every check and applies every write at one revision, or none; its reading
   * operations (get, expire, delete_prefix) are resolved by txn-resolution.ts from reads made
   * inside it, and `results` (one per operation) is given when any reports. A commit's `listed`
   * is the engine's own business: a caller leaves it out.
   */
  write<O extends WriteOp>(bucket: string, op: O): Promise<ResultOf<O>>;
  getEntry(bucket: string, key: string, now: number): Promise<Entry | undefined>;
  /**
   * getEntry without a promise, on stores that read synchronously (SQLite): a read then costs no
   * trip through the microtask queue. The entry returned may be shared with the store's cache:
   * read it, never change it.
   */
  getEntryNow?(bucket: string, key: string, now: number): Entry | undefined;
  /** One page of live keys in byte order (or reverse). */
  listEntries(bucket: string, query: ListQuery, now: number): Promise<ListedEntry[]>;

  readonly history: HistoryReads;
  readonly changes: ChangeFeed;
  readonly maintenance: Maintenance;
  /** The buckets' webhook subscriptions and their delivery state (webhook-store.ts). */
  readonly webhooks: WebhookStore;

  /** Opens a consistent snapshot of the bucket's live entries under `prefix` (an export); undefined when there is no such bucket. */
  openSnapshot(bucket: string, prefix: string, now: number): Promise<EntrySnapshot | undefined>;
  /** Starts staging an import into `bucket` (nothing is written to it until `apply`). */
  beginImport(bucket: string): Promise<ImportStaging>;
  /** Throws when the storage cannot be reached. */
  ping(): Promise<void>;
  close(): Promise<void>;
}
