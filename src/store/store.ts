import type { Usage } from './quota.js';
import type { Actor, ActorFilter, ChangeLogBounds, HistoryRecord, PastRead } from './history-types.js';
import type { StoredValue } from '../values/stored-value.js';
import type { ValueType } from '../values/value-type.js';

/** A bucket as stored. Credentials are hashes; the signing key is kept as is because it signs. */
export interface BucketRecord {
  id: string;
  email: string;
  secretKeyHash: string | null;
  readKeyHash: string | null;
  writeKeyHash: string | null;
  signingKey: string | null;
  signingKeyGeneration: number;
  /**
   * Random, never leaves the server: tokens are signed with a key derived from the signing key and
   * this salt, so a token cannot be used to guess a short signing key offline. Null only for a
   * bucket created by an older version after the upgrade migrated the others (see SECURITY.md).
   */
  tokenSalt: string | null;
  /** Seconds; 0 means no expiry. */
  defaultTtl: number;
}

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

export interface Entry {
  type: ValueType;
  data: Buffer;
  /** Milliseconds since the epoch, or null for no expiry. */
  expiresAt: number | null;
  /** The bucket revision of the key's last change. */
  revision: number;
  /**
   * The revision at which the key last became live from absent or expired (etcd's CreateRevision):
   * a write that replaces a live value keeps it. A lock's fencing token. Undefined on history reads.
   */
  createRevision?: number;
}

/** A value as a write stores it (the revisions are assigned by the store). */
export type NewEntry = Omit<Entry, 'revision' | 'createRevision'>;

/**
 * A write's precondition (RFC 9110 section 13). `ifMatch`: the key must be live, and (unless
 * '*') at one of these revisions. `ifNoneMatch`: the key must not be live ('*'), or not at any
 * of these revisions. Both may be given; both must hold.
 */
export interface Condition {
  ifMatch?: '*' | number[];
  ifNoneMatch?: '*' | number[];
}

/** Whether `condition` holds for the key's live entry (undefined when absent or expired). */
export function conditionHolds(condition: Condition | undefined, current: Entry | undefined): boolean {
  if (!condition) return true;
  const { ifMatch, ifNoneMatch } = condition;
  if (ifMatch !== undefined) {
    if (!current) return false;
    if (ifMatch !== '*' && !ifMatch.includes(current.revision)) return false;
  }
  if (ifNoneMatch !== undefined && current) {
    if (ifNoneMatch === '*' || ifNoneMatch.includes(current.revision)) return false;
  }
  return true;
}

/** Why a write changed nothing: its condition failed (with the key's live entry), or the bucket is gone. */
export type Refusal = { refused: 'precondition'; current: Entry | undefined } | { refused: 'no_bucket' };

export const isRefusal = (outcome: object): outcome is Refusal => 'refused' in outcome;

/** A committed write: the bucket revision it got. */
export interface Written {
  revision: number;
}

/** A delete: whether a live key was removed (false = 404), and the revision of its commit when one was made. */
export interface Deleted {
  deleted: boolean;
  revision?: number;
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

/** A key's metadata as a `meta` listing reads it: everything but the value, and the value's length. */
export interface EntryMeta {
  type: ValueType;
  /** The stored value's length in bytes. */
  size: number;
  expiresAt: number | null;
  revision: number;
}

export interface ListedEntry {
  key: string;
  /** With columns 'values'. */
  entry?: Entry;
  /** With columns 'meta'. */
  meta?: EntryMeta;
}

export type TxnOp =
  | { op: 'set'; key: string; value: StoredValue; expiresAt: number | null }
  | { op: 'delete'; key: string }
  /**
   * The key is live at revision `rev`, or (with `exists`) is live / is absent, or (with `created`)
   * is live with that create revision (a fencing token). Writes nothing.
   */
  | { op: 'check'; key: string; rev?: number; exists?: boolean; created?: number };

/** Operations a transaction may carry beyond the stores' plain ones. */
export type ReadingOp =
  /** Reads the key as it was before this transaction's writes. Writes nothing. */
  | { op: 'get'; key: string }
  /** Gives the live key a new expiry (null: never), keeping its value. Fails like a check when the key is not live. */
  | { op: 'expire'; key: string; expiresAt: number | null }
  /** Deletes every live key under the prefix. */
  | { op: 'delete_prefix'; key: string };

export type TxnRequestOp = TxnOp | ReadingOp;

/** What an operation reports back: a get's entry (undefined when absent), a prefix delete's count. */
export type OpResult = { op: 'get'; key: string; entry: Entry | undefined } | { op: 'delete_prefix'; deleted: number } | undefined;

/** A transaction's outcome: its one revision, the indices (in `ops`) of the checks that failed, or a missing bucket. */
export type CommitOutcome = (Written & { results?: OpResult[] }) | { refused: 'checks'; failed: number[] } | { refused: 'no_bucket' } | { refused: 'moved' };

/**
 * A transaction's extras. `expectRevision`: commit only if the bucket is still at this revision
 * (else `moved`, nothing written): a rollback planned from the state at that revision. `operation`:
 * what history records as having made the revision (default 'transaction').
 */
export interface CommitOptions {
  expectRevision?: number;
  operation?: 'transaction' | 'rollback';
  /** Who commits it, recorded on its change rows. */
  actor?: Actor;
}

/** Whether a transaction check holds for the key's live entry. */
export function checkHolds(op: Extract<TxnOp, { op: 'check' }>, current: Entry | undefined): boolean {
  if (op.rev !== undefined) return current !== undefined && current.revision === op.rev;
  if (op.created !== undefined) return current !== undefined && current.createRevision === op.created;
  return op.exists === (current !== undefined);
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
  apply(options: { replace: boolean; prefix: string; restoreRevision?: number; actor?: Actor }): Promise<Written | { refused: 'no_bucket' }>;
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

/** What a counter update computes from the current live entry (undefined when absent or expired). */
export type EntryUpdate = (current: Entry | undefined) => NewEntry;

/** One key's change in the watch feed's log: the key's state after its revision committed. */
export interface Change {
  revision: number;
  key: string;
  kind: 'set' | 'delete' | 'expire';
  /** For `set`: the value and expiry it wrote. */
  value?: StoredValue;
  expiresAt: number | null;
}

/** Where a bucket's change log starts: `floor` is the newest revision no longer in it; `revision` is the bucket's. */
export type { ChangeLogBounds } from './history-types.js';

/**
 * The storage seam. The HTTP server depends on this interface only; SQLite and PostgreSQL
 * each implement it. `now` is passed in (ms) so expiry is decided in one place per request.
 */
export interface Store {
  readonly backend: 'sqlite' | 'postgres';
  /** True when several server instances may share this store, so caches must expire on their own. */
  readonly shared: boolean;
  /** One line for the start-up log: what the database offers and what kvb uses of it. */
  readonly capabilities: string;
  /** Running counts, read at scrape time. */
  readonly stats: StoreStats;
  /** Whether this store has an entry cache (whose hits and misses `stats` counts). */
  readonly cachesEntries: boolean;
  /** The connection pool's state, for stores that have one. */
  poolStats?(): PoolStats;

  createBucket(bucket: BucketRecord): Promise<void>;
  getBucket(id: string): Promise<BucketRecord | undefined>;
  updateBucket(id: string, changes: BucketChanges): Promise<boolean>;
  /** Deletes the bucket and all its keys. */
  deleteBucket(id: string): Promise<boolean>;

  /** The bucket's revision: every committed change to it adds one. Undefined when there is no such bucket. */
  bucketRevision(bucket: string): Promise<number | undefined>;

  /*
   * Every write below bumps its bucket's revision by one in its own database transaction, and
   * checks its condition in that same transaction; a refused write changes nothing. `actor`: who
   * makes it, recorded on its change rows (history); none recorded when absent.
   */
  getEntry(bucket: string, key: string, now: number): Promise<Entry | undefined>;
  /**
   * getEntry without a promise, on stores that read synchronously (SQLite): a read then costs no
   * trip through the microtask queue. The entry returned may be shared with the store's cache:
   * read it, never change it.
   */
  getEntryNow?(bucket: string, key: string, now: number): Entry | undefined;
  setEntry(bucket: string, key: string, value: StoredValue, expiresAt: number | null, now: number, condition?: Condition, actor?: Actor): Promise<Written | Refusal>;
  deleteEntry(bucket: string, key: string, now: number, condition?: Condition, actor?: Actor): Promise<Deleted | Refusal>;
  /** Reads, computes and writes one key atomically (the counter). `update` may throw to abort. */
  updateEntry(bucket: string, key: string, now: number, update: EntryUpdate, condition?: Condition, actor?: Actor): Promise<Entry | Refusal>;
  /** One page of live keys in byte order (or reverse). */
  listEntries(bucket: string, query: ListQuery, now: number): Promise<ListedEntry[]>;
  /**
   * Evaluates every check and applies every write in one database transaction (one revision), or
   * none. Reading operations (get, expire, delete_prefix) are resolved by txn-resolution.ts from
   * reads made inside that transaction; `results` (one per operation) is given when any reports.
   */
  commit(bucket: string, ops: TxnRequestOp[], now: number, options?: CommitOptions): Promise<CommitOutcome>;

  /*
   * History (history-reader.ts): the change log read as of a past revision. Each read
   * says when the revision is below the bucket's floor or beyond its revision.
   */
  readAt(bucket: string, key: string, revision: number): Promise<PastRead<Entry | undefined>>;
  listAt(bucket: string, query: ListQuery, revision: number): Promise<PastRead<ListedEntry[]>>;
  /** Up to `limit` of a key's recorded changes before revision `before`, newest first; only `actor`'s when given. */
  keyHistory(bucket: string, key: string, before: number, limit: number, actor?: ActorFilter): Promise<HistoryRecord[]>;

  /** Up to `limit` buckets with ids after `after`, in id order (for a dump). */
  listBuckets(after: string | undefined, limit: number): Promise<BucketRecord[]>;
  /** Problems found by an integrity check (empty when none): storage checks and entries without a bucket. */
  checkIntegrity(): Promise<string[]>;
  /** Opens a consistent snapshot of the bucket's live entries under `prefix` (an export); undefined when there is no such bucket. */
  openSnapshot(bucket: string, prefix: string, now: number): Promise<EntrySnapshot | undefined>;
  /** Starts staging an import into `bucket` (nothing is written to it until `apply`). */
  beginImport(bucket: string): Promise<ImportStaging>;

  /** Deletes up to `batch` expired keys (one revision per bucket touched, recorded as SERVER_ACTOR's); returns how many. */
  sweepExpired(now: number, batch: number): Promise<number>;
  /**
   * The watch feed. Every committed change writes its log rows in its own transaction (one row
   * per changed key, the final state). `readChanges` returns whole revisions only, in order.
   */
  readChanges(bucket: string, after: number, limit: number): Promise<Change[]>;
  changeLogBounds(bucket: string): Promise<ChangeLogBounds | undefined>;
  /**
   * Raises each bucket's floor to its newest change committed before `before` (ms) and compacts
   * the log up to it (history-statements.ts `compactChanges`): the state at the floor stays
   * readable. Returns how many buckets.
   */
  pruneChanges(before: number, batch: number): Promise<number>;
  /**
   * Holds each bucket's history above its floor (the bytes of its change rows' keys and values)
   * to `maxBytes` (0: no bound): a bucket written since the last call that holds more gets its
   * floor raised past its oldest revisions and its log compacted, as pruneChanges does. Returns
   * how many buckets.
   */
  boundHistory(maxBytes: number, now: number): Promise<number>;
  /** Called after each commit with the buckets it changed (a store that only this process writes to). */
  onCommit?(listener: (buckets: string[]) => void): void;
  countEntries(): Promise<number>;
  /** How many buckets exist (for `--max-buckets`). */
  countBuckets(): Promise<number>;
  /** A bucket's usage (keys, bytes), kept exact by every write; undefined when there is no such bucket. */
  bucketUsage(bucket: string): Promise<Usage | undefined>;
  /** Throws when the storage cannot be reached. */
  ping(): Promise<void>;
  close(): Promise<void>;
}
