// The public shapes of kvb/client's bucket API (KvbBucket's options and answers), apart from the
// modules that implement them so that each part imports them without importing the others.
import type { Permission } from '../limits.js';
import type { CallOptions, FetchCache, FetchLike } from './kvb-http.js';
import type { Value, ValueType } from './typed-values.js';

export interface ConnectOptions {
  /** The server, e.g. `https://kv.example.com` (without /api/v1). */
  url: string;
  /** The bucket id. */
  bucket: string;
  /** A bucket key (secret, read or write) or a temporary token; sent as `Authorization: Bearer`. */
  token?: string | undefined;
  /** A fetch to use instead of `globalThis.fetch` (a proxy agent, a test double, the CLI's own). */
  fetch?: FetchLike | undefined;
  /** fetch's `cache` mode for every call (in a browser, `'no-store'`). */
  cache?: FetchCache | undefined;
  /** Milliseconds each call may take; 0 = no limit. Default 30000. */
  timeoutMs?: number | undefined;
  /** How often an idempotent call is retried after 429 or 503 (honouring Retry-After). Default 2. */
  retries?: number | undefined;
}

/** What a value of type V reads back as: a number may be stored as int64 (a bigint on read) or float64. */
export type Stored<V> = V extends number ? number | bigint : V;

/** A key's value with what the server says about it. */
export interface Entry<V = Value> {
  key: string;
  value: V;
  type: ValueType;
  /**
   * The stored value's exact text (null for bytes): JSON as it was written, so an integer past 2^53
   * in a JSON document or a float64 `3.0` reads back digit for digit where `value` is a JS number.
   */
  text: string | null;
  /** The revision of the key's last change (use it with `ifRevision` and `atomic().check`). */
  revision: number;
  /** null when the key never expires. */
  expiresAt: Date | null;
}

/** A key as a listing gives it with `values: true` (a listing carries no per-key revision). */
export interface ListedEntry {
  key: string;
  value: Value;
  type: ValueType;
  /** The value's exact text as the listing carries it (null for bytes): JSON compacted, its numbers digit for digit. */
  text: string | null;
  /** The stored value's length in bytes. */
  size: number;
  expiresAt: Date | null;
}

export interface SetOptions extends CallOptions {
  /** Seconds until the key expires; 0 = never. Default: the bucket's default TTL. */
  ttl?: number | undefined;
  /** Write only if the key is live at this revision (If-Match); otherwise PreconditionFailedError. */
  ifRevision?: number | undefined;
  /** Write only if the key is absent or expired (If-None-Match: *); otherwise PreconditionFailedError. */
  ifAbsent?: boolean | undefined;
  /** Store as this type instead of the value's own (e.g. a string as json, a number as int64). */
  type?: ValueType | undefined;
}

export interface DeleteOptions extends CallOptions {
  ifRevision?: number | undefined;
}

export interface IncrementOptions extends CallOptions {
  ttl?: number | undefined;
  ifRevision?: number | undefined;
}

export interface ListOptions extends CallOptions {
  prefix?: string | undefined;
  reverse?: boolean | undefined;
  /** Include each key's value, type, size and expiry. */
  values?: boolean | undefined;
  /** At most this many keys in all. */
  limit?: number | undefined;
  /** Keys asked for per request while following cursors. Default 1000. */
  pageSize?: number | undefined;
  /** List the bucket as it was at this revision (history; 410 GoneError below the bucket's history floor). */
  revision?: number | undefined;
}

export interface GetOptions extends CallOptions {
  /** Read the key as it was at this revision (history). */
  revision?: number | undefined;
}

/** One recorded change of a key, newest first in `history()`. */
export interface HistoryEntry {
  revision: number;
  /** What made it: set, delete, expire, counter, transaction, import or rollback. */
  operation: string;
  time: Date;
  /** null after a delete or expiry (the key was absent then). */
  type: ValueType | null;
  size: number | null;
  expiresAt: Date | null;
  /** Who made it (null: recorded before kvb kept actors): credential kind, token id, client address. */
  actor: { kind: string; tokenId: string | null; address: string | null } | null;
  /** With `values: true`: the value it had (undefined when absent). */
  value?: Value | undefined;
}

export interface HistoryOptions extends CallOptions {
  /** Include each change's value. */
  values?: boolean | undefined;
  /** At most this many changes (newest first). Default: every recorded change. */
  limit?: number | undefined;
  /** Only this actor's changes: a kind (`secret`, `write`, `read`, `anonymous`, `token`, `server`) or `token:ID`. Needs the secret key. */
  actor?: string | undefined;
}

/** One change of the bucket's change log (`changeLog()`): a key's recorded change, and the key. */
export interface BucketLogEntry extends HistoryEntry {
  key: string;
}

export interface BucketLogOptions extends HistoryOptions {
  /** Only changes to keys under this prefix. */
  prefix?: string | undefined;
  /** Changes after this revision, or committed at or after this time. */
  since?: number | Date | undefined;
  /** Changes up to and including this revision, or committed at or before this time. */
  until?: number | Date | undefined;
}

export interface UpdateOptions extends CallOptions {
  /** Attempts after the first when another writer got in between. Default 10. */
  retries?: number | undefined;
  /** Seconds until expiry; default: an existing key keeps its expiry, a new one gets the bucket default. */
  ttl?: number | undefined;
  type?: ValueType | undefined;
}

export interface TokenOptions extends CallOptions {
  /** The key prefix the token is limited to (1 to 128 bytes). */
  prefix: string;
  permissions: Permission[];
  /** Seconds the token is valid. */
  ttl: number;
}

export interface ImportOptions extends CallOptions {
  /** merge (default) sets every key in the file; replace also deletes keys it does not hold. */
  mode?: 'merge' | 'replace' | undefined;
  /** With replace: replace only keys under this prefix. */
  prefix?: string | undefined;
  /** The fraction of the body sent, as it goes in a browser (not for a stream), 1 once answered. */
  onUploadProgress?: ((fraction: number) => void) | undefined;
}

export type CommitResult = { ok: true; revision: number } | { ok: false; failedChecks: Array<{ index: number; key: string }> };

/** A listing: iterate it for its keys (it follows cursors); `revision` is the bucket revision its first page was read at. */
export interface Listing<T> extends AsyncIterable<T> {
  readonly revision: number | undefined;
}
