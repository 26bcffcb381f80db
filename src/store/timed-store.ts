import type { CounterUpdate } from './core/write-ops.js';
import type { BucketChanges, BucketRecord, CommitOptions, Condition, ListQuery, PoolStats, Store, StoreStats, TxnRequestOp } from './store.js';
import type { StoredValue } from '../values/stored-value.js';
import type { Actor, ActorFilter } from './history-types.js';

/** The storage operations whose latency is measured: a small fixed set, so label cardinality stays bounded. */
export const STORE_OPS = ['get', 'set', 'delete', 'update', 'list', 'commit', 'bucket_read', 'bucket_write', 'count'] as const;
export type StoreOp = (typeof STORE_OPS)[number];

/** Receives one storage operation's duration in seconds. */
export type ObserveOp = (op: StoreOp, seconds: number) => void;

/**
 * A Store that reports how long each operation took (including failed ones) and otherwise
 * passes every call through unchanged.
 */
export class TimedStore implements Store {
  /** Timed without a promise, so the synchronous read stays synchronous (made once, not per call). */
  readonly getEntryNow: Store['getEntryNow'];

  constructor(
    private readonly inner: Store,
    private readonly observe: ObserveOp,
  ) {
    const read = inner.getEntryNow?.bind(inner);
    this.getEntryNow = read && ((bucket, key, now) => {
      const start = performance.now();
      try {
        return read(bucket, key, now);
      } finally {
        observe('get', (performance.now() - start) / 1000);
      }
    });
  }

  get backend() {
    return this.inner.backend;
  }
  get shared() {
    return this.inner.shared;
  }
  get capabilities() {
    return this.inner.capabilities;
  }
  get stats(): StoreStats {
    return this.inner.stats;
  }
  get cachesEntries() {
    return this.inner.cachesEntries;
  }
  get poolStats(): (() => PoolStats) | undefined {
    return this.inner.poolStats?.bind(this.inner);
  }
  /** Passed through as is: the watch hub on SQLite is woken by the store's commits. */
  get onCommit(): ((listener: (buckets: string[]) => void) => void) | undefined {
    return this.inner.onCommit?.bind(this.inner);
  }

  private async timed<T>(op: StoreOp, run: () => Promise<T>): Promise<T> {
    const start = performance.now();
    try {
      return await run();
    } finally {
      this.observe(op, (performance.now() - start) / 1000);
    }
  }

  createBucket(bucket: BucketRecord) {
    return this.timed('bucket_write', () => this.inner.createBucket(bucket));
  }
  getBucket(id: string) {
    return this.timed('bucket_read', () => this.inner.getBucket(id));
  }
  updateBucket(id: string, changes: BucketChanges) {
    return this.timed('bucket_write', () => this.inner.updateBucket(id, changes));
  }
  deleteBucket(id: string) {
    return this.timed('bucket_write', () => this.inner.deleteBucket(id));
  }
  bucketRevision(bucket: string) {
    return this.timed('bucket_read', () => this.inner.bucketRevision(bucket));
  }
  getEntry(bucket: string, key: string, now: number) {
    return this.timed('get', () => this.inner.getEntry(bucket, key, now));
  }
  setEntry(bucket: string, key: string, value: StoredValue, expiresAt: number | null, now: number, condition?: Condition, actor?: Actor) {
    return this.timed('set', () => this.inner.setEntry(bucket, key, value, expiresAt, now, condition, actor));
  }
  deleteEntry(bucket: string, key: string, now: number, condition?: Condition, actor?: Actor) {
    return this.timed('delete', () => this.inner.deleteEntry(bucket, key, now, condition, actor));
  }
  updateEntry(bucket: string, key: string, now: number, update: CounterUpdate, condition?: Condition, actor?: Actor) {
    return this.timed('update', () => this.inner.updateEntry(bucket, key, now, update, condition, actor));
  }
  listEntries(bucket: string, query: ListQuery, now: number) {
    return this.timed('list', () => this.inner.listEntries(bucket, query, now));
  }
  commit(bucket: string, ops: TxnRequestOp[], now: number, options?: CommitOptions) {
    return this.timed('commit', () => this.inner.commit(bucket, ops, now, options));
  }
  readAt(bucket: string, key: string, revision: number) {
    return this.timed('get', () => this.inner.readAt(bucket, key, revision));
  }
  listAt(bucket: string, query: ListQuery, revision: number) {
    return this.timed('list', () => this.inner.listAt(bucket, query, revision));
  }
  keyHistory(bucket: string, key: string, before: number, limit: number, actor?: ActorFilter) {
    return this.timed('list', () => this.inner.keyHistory(bucket, key, before, limit, actor));
  }
  sweepExpired(now: number, batch: number) {
    return this.inner.sweepExpired(now, batch);
  }
  countEntries() {
    return this.timed('count', () => this.inner.countEntries());
  }
  countBuckets() {
    return this.timed('count', () => this.inner.countBuckets());
  }
  bucketUsage(bucket: string) {
    return this.timed('bucket_read', () => this.inner.bucketUsage(bucket));
  }
  // Whole-bucket work (export, import, dump, integrity) is long by nature: not in the latency histogram.
  listBuckets(after: string | undefined, limit: number) {
    return this.inner.listBuckets(after, limit);
  }
  checkIntegrity() {
    return this.inner.checkIntegrity();
  }
  openSnapshot(bucket: string, prefix: string, now: number) {
    return this.inner.openSnapshot(bucket, prefix, now);
  }
  beginImport(bucket: string) {
    return this.inner.beginImport(bucket);
  }
  // The watch feed's reads and pruning run in the background, not on a request's path.
  readChanges(bucket: string, after: number, limit: number) {
    return this.inner.readChanges(bucket, after, limit);
  }
  changeLogBounds(bucket: string) {
    return this.inner.changeLogBounds(bucket);
  }
  pruneChanges(before: number, batch: number) {
    return this.inner.pruneChanges(before, batch);
  }
  boundHistory(maxBytes: number, now: number) {
    return this.inner.boundHistory(maxBytes, now);
  }
  ping() {
    return this.inner.ping();
  }
  close() {
    return this.inner.close();
  }
}
