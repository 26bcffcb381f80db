import { NotFoundError, PreconditionFailedError } from './client-errors.js';
import {
  type BucketChanges,
  type BucketPolicy,
  type CallOptions,
  type CreateBucketFields,
  DEFAULT_URL,
  type FetchLike,
  type ImportedWebhook,
  KvbHttp,
  type RequestBody,
  type RollbackResult,
  type ValueRead,
} from './kvb-http.js';
import { type Storable, type Value, decodeValue, encodeValue } from './typed-values.js';
import { type WatchEvent, type WatchOptions, watchFeed } from './watch-feed.js';
import { type ManyRead, deletePrefix, expire, getMany } from './bucket-primitives.js';
import { type Lock, type LockOptions, acquireLock } from './lock.js';
import { AtomicOperation } from './atomic-operation.js';
import { listBucket } from './bucket-listing.js';
import { historyPages } from './bucket-history.js';
import type {
  BucketLogEntry,
  BucketLogOptions,
  ConnectOptions,
  DeleteOptions,
  Entry,
  GetOptions,
  HistoryEntry,
  HistoryOptions,
  ImportOptions,
  IncrementOptions,
  ListOptions,
  ListedEntry,
  Listing,
  SetOptions,
  Stored,
  TokenOptions,
  UpdateOptions,
} from './bucket-types.js';

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
    return listBucket(this.http, this.id, options);
  }

  /** The key's recorded changes, newest first (history is kept for the server's --history-retention). */
  async history(key: string, options: HistoryOptions = {}): Promise<HistoryEntry[]> {
    return (await historyPages(this.http, this.id, key, options)) as HistoryEntry[];
  }

  /**
   * The bucket's change log: every recorded change (or under `prefix`) in revision order, each
   * revision's keys in byte order, by `actor` and within `since`/`until` when given. Needs the secret key.
   */
  async changeLog(options: BucketLogOptions = {}): Promise<BucketLogEntry[]> {
    return (await historyPages(this.http, this.id, undefined, options)) as BucketLogEntry[];
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
