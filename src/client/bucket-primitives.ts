/**
 * The primitives built on the transaction's reading operations (`get`, `expire`, `delete_prefix`):
 * several keys read at one revision, a new expiry without rewriting the value, and a prefix
 * deleted as one revision. KvbBucket's methods call these.
 */
import type { CallOptions, KvbHttp } from './kvb-http.js';
import { type Value, type ValueType, decodeJsonValue } from './typed-values.js';

/** A key as a transaction's get reads it. */
export interface ReadEntry<V = Value> {
  key: string;
  value: V;
  type: ValueType;
  revision: number;
  expiresAt: Date | null;
}

/** What `getMany` reads: each key's entry (null when absent or expired), all as of `revision`. */
export interface ManyRead {
  revision: number;
  entries: Array<ReadEntry | null>;
}

interface ResultLine {
  key: string;
  type: ValueType;
  value: unknown;
  expires_at: string | null;
  rev: number;
}

/** Reads up to 1,000 keys at one bucket revision (one request). */
export async function getMany(http: KvbHttp, bucket: string, keys: string[], options: CallOptions = {}): Promise<ManyRead> {
  if (keys.length === 0) return { revision: 0, entries: [] };
  const outcome = await http.txn(bucket, JSON.stringify({ txn: keys.map((key) => ({ get: key })) }), options);
  if (!outcome.ok || outcome.results === undefined)
    throw new Error('the server answered a get transaction without results (is it older than kvb 0.2?)');
  const body = JSON.parse(outcome.results) as { revision: number; results: Array<ResultLine | null> };
  return {
    revision: body.revision,
    // int64 values arrive as decimal strings, so they decode exactly.
    entries: body.results.map((r) =>
      r === null
        ? null
        : {
            key: r.key,
            value: decodeJsonValue(r.type, r.value),
            type: r.type,
            revision: r.rev,
            expiresAt: r.expires_at ? new Date(r.expires_at) : null,
          },
    ),
  };
}

/** Gives a live key a new expiry, `seconds` from now (0: never), keeping its value. Resolves false when the key is not live. */
export async function expire(http: KvbHttp, bucket: string, key: string, seconds: number, options: CallOptions = {}): Promise<boolean> {
  if (!Number.isInteger(seconds) || seconds < 0) throw new RangeError(`expire takes whole seconds >= 0, not ${seconds}`);
  const outcome = await http.txn(bucket, JSON.stringify({ txn: [{ expire: key, ttl: seconds }] }), { ...options, acceptConflict: true });
  return outcome.ok;
}

/** Deletes every live key under a non-empty prefix as one revision; resolves with how many were deleted. */
export async function deletePrefix(
  http: KvbHttp,
  bucket: string,
  prefix: string,
  options: CallOptions = {},
): Promise<{ deleted: number; revision: number }> {
  if (prefix === '') throw new RangeError('deletePrefix needs a non-empty prefix (deleteBucket removes everything)');
  const outcome = await http.txn(bucket, JSON.stringify({ txn: [{ delete_prefix: prefix }] }), options);
  if (!outcome.ok || outcome.results === undefined) throw new Error('the server answered a delete_prefix transaction without results');
  const body = JSON.parse(outcome.results) as { revision: number; results: Array<{ deleted: number }> };
  return { deleted: body.results[0]?.deleted ?? 0, revision: body.revision };
}
