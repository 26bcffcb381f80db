import { HISTORY_PAGE_MAX, type Permission } from '../limits.js';
import { ConflictError, NotFoundError, PreconditionFailedError } from './client-errors.js';
import {
  type BucketChanges,
  type BucketPolicy,
  type CallOptions,
  type CreateBucketFields,
  DEFAULT_URL,
  type FetchCache,
  type FetchLike,
  type HistoryLine,
  type ImportedWebhook,
  KvbHttp,
  type RequestBody,
  type RollbackResult,
  type ValueRead,
} from './kvb-http.js';
import {
  type JsonValue,
  type Storable,
  type Value,
  type ValueType,
  decodeJsonValue,
  decodeValue,
  encodeValue,
  linesOf,
  txnValue,
  typeOfValue,
} from './typed-values.js';
import { type WatchEvent, type WatchOptions, watchFeed } from './watch-feed.js';
import { type ManyRead, deletePrefix, expire, getMany } from './bucket-primitives.js';
import { type FencingToken, type Lock, type LockOptions, acquireLock } from './lock.js';

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

/** An entry from a value read, typed by its Kvb-Type. */
function entryOf(key: string, read: ValueRead): Entry {
  const type = read.type ?? 'bytes';
  return {
    key,
    value: decodeValue(type, read.data),
    type,
    text: type === 'bytes' ? null : new TextDecoder().decode(read.data),
    revision: read.revision ?? 0,
    expiresAt: read.expiresAt ? new Date(read.expiresAt) : null,
  };
}

const isMissingKey = (err: unknown) => err instanceof NotFoundError && err.detail === 'no such key';
/** A meta listing line's value: the last field, as the server wrote it (JSON compacted, numbers as stored). */
const VALUE_AT_END = /,"value":(.*)\}$/s;

/** A history line (and its text, for an int64's exact digits) as an entry; with its key in the bucket's change log. */
function historyEntry(line: HistoryLine, text: string, values: boolean | undefined): HistoryEntry | BucketLogEntry {
  const int64 = line.type === 'int64' ? VALUE_AT_END.exec(text)?.[1] : undefined;
  return {
    ...(line.key !== undefined && { key: line.key }),
    revision: line.rev,
    operation: line.operation,
    time: new Date(line.time),
    type: line.type,
    size: line.size,
    expiresAt: line.expires_at ? new Date(line.expires_at) : null,
    actor: line.actor ? { kind: line.actor.kind, tokenId: line.actor.token_id, address: line.actor.address } : null,
    ...(values && line.type !== null && { value: decodeJsonValue(line.type, line.value, int64) }),
  };
}

/** One bucket, typed. Every method takes an optional `signal` and `timeoutMs`. */
export class KvbBucket {
  /** The HTTP layer, for what the typed methods do not cover. */
  readonly http: KvbHttp;

  constructor(
    http: KvbHttp,
    readonly id: string,
  ) {
    this.http = http;
  }

  /** The key's entry, or null when it is absent or expired. */
  async get<V extends Storable<V> = Value>(key: string, options: GetOptions = {}): Promise<Entry<V> | null> {
    try {
      return entryOf(key, await this.http.get(this.id, key, options)) as Entry<V>;
    } catch (err) {
      if (isMissingKey(err)) return null;
      throw err;
    }
  }

  /** Several keys read at one bucket revision (at most 1,000): each entry, or null when absent or expired. */
  async getMany(keys: string[], options: CallOptions = {}): Promise<ManyRead> {
    return getMany(this.http, this.id, keys, options);
  }

  /** Gives a live key a new expiry `seconds` from now (0: never) without rewriting its value; false when the key is not live. */
  async expire(key: string, seconds: number, options: CallOptions = {}): Promise<boolean> {
    return expire(this.http, this.id, key, seconds, options);
  }

  /** Deletes every live key under a non-empty prefix as one revision (at most 50,000 keys). */
  async deletePrefix(prefix: string, options: CallOptions = {}): Promise<{ deleted: number; revision: number }> {
    return deletePrefix(this.http, this.id, prefix, options);
  }

  /**
   * Acquires the lock `name` (a key), waiting on the watch feed while another holder has it;
   * renewed while held, until `release()`. Watch `lost` if the work must stop when it is lost.
   */
  async lock(name: string, options: LockOptions = {}): Promise<Lock> {
    return acquireLock(this.http, this.id, name, options);
  }

  /**
   * Stores a value with the type it has (see `typeOfValue`: an integral number is int64 and reads
   * back as a bigint), or `options.type`; resolves with the stored entry.
   */
  async set<V extends Storable<V>>(key: string, value: V, options: SetOptions = {}): Promise<Entry<Stored<V>>> {
    const { body, contentType } = encodeValue(value, options.type);
    const read = await this.http.set(this.id, key, body, {
      ...options,
      contentType,
      condition: { ifRevision: options.ifRevision, ifAbsent: options.ifAbsent },
    });
    return entryOf(key, read) as Entry<Stored<V>>;
  }

  /** Deletes a key; resolves false when there was none. */
  async delete(key: string, options: DeleteOptions = {}): Promise<boolean> {
    try {
      await this.http.del(this.id, key, { ifRevision: options.ifRevision }, options);
      return true;
    } catch (err) {
      if (isMissingKey(err)) return false;
      throw err;
    }
  }

  /**
   * Adds `delta` atomically (a missing key starts from it): an int64 with a bigint or integer delta,
   * a float64 once either side is a float. Resolves with the new entry. Never retried on its own.
   */
  async increment(key: string, delta: bigint | number = 1n, options: IncrementOptions = {}): Promise<Entry<bigint | number>> {
    let text: string;
    if (typeof delta === 'bigint') text = delta < 0n ? `-${-delta}` : `+${delta}`;
    else if (Number.isFinite(delta)) text = `${delta < 0 || Object.is(delta, -0) ? '-' : '+'}${String(Math.abs(delta))}`;
    else throw new RangeError(`a delta must be finite, not ${delta}`);
    const read = await this.http.incr(this.id, key, text, options.ttl, { ifRevision: options.ifRevision }, options);
    return entryOf(key, read) as Entry<bigint | number>;
  }

  /** Every key in byte order (or reversed), following cursors; with `values: true`, each key's value, type, size and expiry. */
  list(options: ListOptions & { values: true }): Listing<ListedEntry>;
  list(options?: ListOptions & { values?: false | undefined }): Listing<{ key: string }>;
  list(options?: ListOptions): Listing<{ key: string } | ListedEntry>;
  list(options: ListOptions = {}): Listing<{ key: string } | ListedEntry> {
    const http = this.http;
    const id = this.id;
    const pageSize = options.pageSize ?? 1000;
    const wanted = options.limit ?? Number.POSITIVE_INFINITY;
    const listing = {
      revision: undefined as number | undefined,
      async *[Symbol.asyncIterator]() {
        let cursor: string | undefined;
        let listed = 0;
        do {
          const page = await http.listPage(
            id,
            {
              prefix: options.prefix,
              reverse: options.reverse,
              values: options.values,
              meta: options.values,
              format: 'jsonl',
              limit: Math.min(pageSize, wanted - listed),
              cursor,
              revision: options.revision,
            },
            options,
          );
          listing.revision ??= page.revision;
          for await (const line of linesOf(page.body)) {
            listed++;
            if (!options.values) {
              yield { key: JSON.parse(line) as string };
              continue;
            }
            const row = JSON.parse(line) as { key: string; type: ValueType; size: number; expires_at: string | null; value: unknown };
            // Numbers are JSON numbers in a listing: keep their exact text, not the rounded double.
            const source = VALUE_AT_END.exec(line)?.[1];
            const text = row.type === 'bytes' ? null : row.type === 'text' ? String(row.value) : (source ?? JSON.stringify(row.value));
            yield {
              key: row.key,
              value: decodeJsonValue(row.type, row.value, row.type === 'int64' ? source : undefined),
              type: row.type,
              text,
              size: row.size,
              expiresAt: row.expires_at ? new Date(row.expires_at) : null,
            };
          }
          cursor = page.nextCursor;
        } while (cursor !== undefined && listed < wanted);
      },
    };
    return listing;
  }

  /** The key's recorded changes, newest first (history is kept for the server's --history-retention). */
  async history(key: string, options: HistoryOptions = {}): Promise<HistoryEntry[]> {
    return (await this.historyPages(key, options)) as HistoryEntry[];
  }

  /**
   * The bucket's change log: every recorded change (or under `prefix`) in revision order, each
   * revision's keys in byte order, by `actor` and within `since`/`until` when given. Needs the secret key.
   */
  async changeLog(options: BucketLogOptions = {}): Promise<BucketLogEntry[]> {
    return (await this.historyPages(undefined, options)) as BucketLogEntry[];
  }

  private async historyPages(key: string | undefined, options: BucketLogOptions): Promise<Array<HistoryEntry | BucketLogEntry>> {
    const entries: Array<HistoryEntry | BucketLogEntry> = [];
    const wanted = options.limit ?? Number.POSITIVE_INFINITY;
    const bound = (b: number | Date | undefined) => (b instanceof Date ? b.toISOString() : b === undefined ? undefined : String(b));
    let cursor: string | undefined;
    do {
      const page = await this.http.history(
        this.id,
        key,
        {
          values: options.values,
          limit: Math.min(HISTORY_PAGE_MAX, wanted - entries.length),
          cursor,
          actor: options.actor,
          prefix: options.prefix,
          since: bound(options.since),
          until: bound(options.until),
        },
        options,
      );
      for (const [i, line] of page.lines.entries()) entries.push(historyEntry(line, page.texts[i]!, options.values));
      cursor = page.nextCursor;
    } while (cursor !== undefined && entries.length < wanted);
    return entries;
  }

  /**
   * Makes the bucket (or `prefix`) equal to its state at `revision` as one new revision, all or
   * nothing; `dryRun` only says what would change. Needs the secret key, or write and delete on the prefix.
   */
  async rollback(
    revision: number,
    options: CallOptions & { prefix?: string | undefined; dryRun?: boolean | undefined } = {},
  ): Promise<RollbackResult> {
    return this.http.rollback(this.id, revision, { prefix: options.prefix, dryRun: options.dryRun }, options);
  }

  /** A transaction: checks, sets and deletes that commit together or not at all. */
  atomic(): AtomicOperation {
    return new AtomicOperation(this.http, this.id);
  }

  /**
   * Compare-and-set loop: reads the key, computes its next value with `fn` (given undefined when it
   * is absent), writes it only if nothing changed meanwhile, and starts over when something did.
   * An existing key keeps its type (when the new value fits it) and its expiry unless `ttl` is given.
   */
  async update<V extends Storable<V>>(
    key: string,
    fn: (current: Value | undefined, entry: Entry | null) => V | Promise<V>,
    options: UpdateOptions = {},
  ): Promise<Entry<Stored<V>>> {
    const retries = options.retries ?? 10;
    for (let attempt = 0; ; attempt++) {
      const current = await this.get(key, options);
      const next = await fn(current?.value, current);
      let ttl = options.ttl;
      if (ttl === undefined && current)
        ttl = current.expiresAt === null ? 0 : Math.max(1, Math.ceil((current.expiresAt.getTime() - Date.now()) / 1000));
      // A JSON document stays JSON when the next value is one (a number included); a bigint or bytes cannot be.
      const type =
        options.type ?? (current?.type === 'json' && typeof next !== 'bigint' && !(next instanceof Uint8Array) ? 'json' : undefined);
      try {
        return await this.set(key, next, { ...options, ttl, type, ...(current ? { ifRevision: current.revision } : { ifAbsent: true }) });
      } catch (err) {
        if (!(err instanceof PreconditionFailedError) || attempt >= retries) throw err;
        // Another writer got in between: back off a little (more with every loss), then read again.
        await new Promise((resolve) => setTimeout(resolve, Math.random() * Math.min(200, 5 * 2 ** attempt)));
      }
    }
  }

  /** The change feed (see WatchEvent); reconnects with backoff and resumes by revision. Ends with `break` or `signal`. */
  watch(options: WatchOptions = {}): AsyncIterable<WatchEvent> {
    return watchFeed(this.http, this.id, options);
  }

  /** The bucket (or a prefix) in the NDJSON export format, streamed from one consistent snapshot. */
  async export(options: CallOptions & { prefix?: string | undefined } = {}): Promise<AsyncIterable<Uint8Array>> {
    return this.http.exportBucket(this.id, options.prefix, options);
  }

  /**
   * Imports an export (text, bytes, or a stream of bytes); all or nothing. Never retried (a stream
   * is read once). `webhooks`: those the file's webhook lines added, each with its new signing
   * secret, given only here.
   */
  async import(
    body: RequestBody,
    options: ImportOptions = {},
  ): Promise<{ imported: number; skipped: number; revision: number; webhooks?: ImportedWebhook[] }> {
    const result = await this.http.importBucket(this.id, body, options);
    const done = { imported: result.imported, skipped: result.skipped, revision: result.rev };
    return result.webhooks === undefined ? done : { ...done, webhooks: result.webhooks };
  }

  /** A temporary token limited to a prefix and permissions (needs the secret key; 503 without a signing key). */
  async mintToken(options: TokenOptions): Promise<string> {
    return (await this.http.mintToken(this.id, options, options)).access_token;
  }

  /** The bucket's policy (needs the secret key). */
  async policy(options: CallOptions = {}): Promise<BucketPolicy> {
    return this.http.policy(this.id, options);
  }

  /** Sets, rotates (a string) or clears (null) credentials and the default TTL. */
  async updatePolicy(changes: BucketChanges, options: CallOptions = {}): Promise<void> {
    await this.http.updateBucket(this.id, changes, options);
  }

  /** Deletes the bucket and every key in it. */
  async deleteBucket(options: CallOptions = {}): Promise<void> {
    await this.http.deleteBucket(this.id, options);
  }
}

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

/** A client for one bucket. */
export function connect(options: ConnectOptions): KvbBucket {
  if (!options.bucket) throw new TypeError('connect: a bucket id is needed');
  return new KvbBucket(new KvbHttp(options), options.bucket);
}

/**
 * A client configured as the CLI is: KVB_URL (default http://127.0.0.1:8080), KVB_BUCKET, KVB_TOKEN
 * and KVB_TIMEOUT (seconds). `env` defaults to `process.env` (Node, Bun) or `Deno.env`.
 */
export function connectFromEnv(env: Record<string, string | undefined> = platformEnv(), options: Partial<ConnectOptions> = {}): KvbBucket {
  const bucket = env.KVB_BUCKET;
  if (!bucket) throw new TypeError('connectFromEnv: KVB_BUCKET is not set');
  const timeout = env.KVB_TIMEOUT ? Number(env.KVB_TIMEOUT) : undefined;
  if (timeout !== undefined && !(timeout > 0))
    throw new TypeError(`KVB_TIMEOUT must be a number of seconds above 0, not ${JSON.stringify(env.KVB_TIMEOUT)}`);
  return connect({
    url: env.KVB_URL || DEFAULT_URL,
    bucket,
    token: env.KVB_TOKEN || undefined,
    ...(timeout !== undefined && { timeoutMs: timeout * 1000 }),
    ...options,
  });
}

function platformEnv(): Record<string, string | undefined> {
  const g = globalThis as {
    process?: { env?: Record<string, string | undefined> };
    Deno?: { env: { toObject(): Record<string, string> } };
  };
  return g.process?.env ?? g.Deno?.env.toObject() ?? {};
}

/** Creates a bucket; resolves with its id. `token` is the operator's bucket-creation key, when the server wants one. */
export async function createBucket(
  server: { url: string; token?: string | undefined; fetch?: FetchLike | undefined; timeoutMs?: number | undefined },
  fields: CreateBucketFields,
  options: CallOptions = {},
): Promise<string> {
  // Not retried: a second POST would create a second bucket.
  return new KvbHttp(server).createBucket(fields, options);
}
