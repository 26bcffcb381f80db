import { ConflictError } from './client-errors.js';
import type { CallOptions, KvbHttp } from './kvb-http.js';
import type { CommitResult } from './bucket-types.js';
import type { FencingToken } from './lock.js';
import { type JsonValue, type Value, type ValueType, txnValue, typeOfValue } from './typed-values.js';

type TxnOp =
  | { check: string; rev: number }
  | { check: string; exists: boolean }
  | { check: string; created: number }
  | { set: string; value: string | JsonValue; type?: ValueType; ttl?: number }
  | { delete: string };

/**
 * Checks and writes that commit together. A value is typed as `set` types it (a string text, a
 * bigint or integral number int64, a fractional number float64, bytes bytes, other JSON json);
 * the server's `"type"` extension of the transaction format carries the types it would not infer.
 */
export class AtomicOperation {
  private readonly ops: TxnOp[] = [];

  constructor(
    private readonly http: KvbHttp,
    private readonly bucket: string,
  ) {}

  /** Commit only if the key is live at `revision` (an Entry's revision), or, with null, absent. */
  check(key: string, revision: number | null): this {
    this.ops.push(revision === null ? { check: key, exists: false } : { check: key, rev: revision });
    return this;
  }

  /** Commit only if the key exists (true) or is absent (false), at any revision. */
  checkExists(key: string, exists: boolean): this {
    this.ops.push({ check: key, exists });
    return this;
  }

  /** Commit only if the key is live and was created (last became live from absent or expired) at `createRevision`. */
  checkCreated(key: string, createRevision: number): this {
    this.ops.push({ check: key, created: createRevision });
    return this;
  }

  /**
   * Commit only while `lock` is still held by the holder that got this token: a holder paused past
   * its lock's TTL, whose lock another has taken since, gets `{ ok: false }` instead of
   * overwriting the new holder's work. Takes a `Lock` from `lock()`, or `{ name, token }` (e.g.
   * from `kvb lock`'s KVB_LOCK and KVB_LOCK_REVISION).
   */
  fence(lock: FencingToken): this {
    return this.checkCreated(lock.name, lock.token);
  }

  /** Sets `key` to `value`, typed as `KvbBucket.set` types it (or as `options.type`). */
  set(key: string, value: Value, options: { ttl?: number | undefined; type?: ValueType | undefined } = {}): this {
    if (value === null || value === undefined) throw new TypeError('a transaction cannot store null or undefined');
    const op = { set: key, ...txnValue(value, options.type ?? typeOfValue(value)) };
    this.ops.push(options.ttl === undefined ? op : { ...op, ttl: options.ttl });
    return this;
  }

  delete(key: string): this {
    this.ops.push({ delete: key });
    return this;
  }

  /** `{ ok: true, revision }`, or `{ ok: false, failedChecks }` when a check failed (nothing written). Never retried on its own. */
  async commit(options: CallOptions = {}): Promise<CommitResult> {
    const outcome = await this.http.txn(this.bucket, JSON.stringify({ txn: this.ops }), { ...options, acceptConflict: true });
    if (outcome.ok) return { ok: true, revision: outcome.revision ?? 0 };
    const failedChecks = outcome.failedChecks.map((index) => {
      const op = this.ops[index];
      return { index, key: op && 'check' in op ? op.check : '' };
    });
    if (failedChecks.length === 0) throw new ConflictError(409, 'conflict', `transaction in bucket ${this.bucket}`, 'checks failed');
    return { ok: false, failedChecks };
  }
}
