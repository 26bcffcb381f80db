import type { StoredValue, ValueType } from '../values/value-type.js';

/** A bucket as stored. Credentials are hashes; the signing key is kept as is because it signs. */
export interface BucketRecord {
  id: string;
  email: string;
  secretKeyHash: string | null;
  readKeyHash: string | null;
  writeKeyHash: string | null;
  signingKey: string | null;
  signingKeyGeneration: number;
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
  defaultTtl?: number;
}

export interface Entry {
  type: ValueType;
  data: Buffer;
  /** Milliseconds since the epoch, or null for no expiry. */
  expiresAt: number | null;
}

export interface ListQuery {
  prefix: string;
  reverse: boolean;
  withValues: boolean;
  /** Rows to skip before the first returned row. */
  offset: number;
  limit: number;
  /** Continue after this key (exclusive), in the listing's order. */
  after?: string;
}

export interface ListedEntry {
  key: string;
  entry?: Entry;
}

export type TxnOp =
  | { op: 'set'; key: string; value: StoredValue; expiresAt: number | null }
  | { op: 'delete'; key: string };

/** What a counter update computes from the current live entry (undefined when absent or expired). */
export type EntryUpdate = (current: Entry | undefined) => Entry;

/**
 * The storage seam. The HTTP server depends on this interface only; SQLite and PostgreSQL
 * each implement it. `now` is passed in (ms) so expiry is decided in one place per request.
 */
export interface Store {
  readonly backend: 'sqlite' | 'postgres';
  /** True when several server instances may share this store, so caches must expire on their own. */
  readonly shared: boolean;

  createBucket(bucket: BucketRecord): Promise<void>;
  getBucket(id: string): Promise<BucketRecord | undefined>;
  updateBucket(id: string, changes: BucketChanges): Promise<boolean>;
  /** Deletes the bucket and all its keys. */
  deleteBucket(id: string): Promise<boolean>;

  getEntry(bucket: string, key: string, now: number): Promise<Entry | undefined>;
  setEntry(bucket: string, key: string, value: StoredValue, expiresAt: number | null): Promise<void>;
  /** False when the key was absent or already expired. */
  deleteEntry(bucket: string, key: string, now: number): Promise<boolean>;
  /** Reads, computes and writes one key atomically (the counter). `update` may throw to abort. */
  updateEntry(bucket: string, key: string, now: number, update: EntryUpdate): Promise<Entry>;
  /** One page of live keys in byte order (or reverse). */
  listEntries(bucket: string, query: ListQuery, now: number): Promise<ListedEntry[]>;
  /** Applies every operation in one database transaction, or none. */
  commit(bucket: string, ops: TxnOp[]): Promise<void>;

  /** Deletes up to `batch` expired keys; returns how many. */
  sweepExpired(now: number, batch: number): Promise<number>;
  countEntries(): Promise<number>;
  /** Throws when the storage cannot be reached. */
  ping(): Promise<void>;
  close(): Promise<void>;
}
