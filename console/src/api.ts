/**
 * Every call the console makes to the kvb HTTP API, one function per call, each made by the client
 * library (src/client, published as kvb-client): the console sends no request of its own.
 */

import type { BucketPolicy } from '../../src/client/bucket-policy.js';
import { KvbHttpError } from '../../src/client/client-errors.js';
import type { BodyStream, BucketChanges, CreateBucketFields, ValueRead } from '../../src/client/http-types.js';
import { KvbHttp } from '../../src/client/kvb-http.js';
import { MAX_TXN_OPS, type Permission, PERMISSIONS, type ValueType, VALUE_TYPES } from '../../src/limits.js';

export { MAX_TXN_OPS, type Permission, PERMISSIONS, type ValueType, VALUE_TYPES };

export interface Connection {
  bucket: string;
  credential: string;
}

/** An error answer from the server: its status, envelope message and the Kvb-Error-Detail reason. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    readonly detail: string,
  ) {
    super(detail ? `${code}: ${detail}` : code || `HTTP ${status}`);
  }
}

/** Relative to the console's own URL (/console/), so a reverse proxy may mount kvb under a path. */
export const API_BASE = new URL('../api/v1', document.baseURI).href;
const SERVER = new URL('..', document.baseURI).href;

// The console never caches an answer, never retries on its own (the user sees a 429 or 503 and
// acts) and sets no deadline: as before, only the browser's own limits apply.
const clients = new Map<string, KvbHttp>();

/** The client for one credential (the client sends its token with every call). */
function client(credential: string | undefined): KvbHttp {
  const token = credential ?? '';
  let http = clients.get(token);
  if (!http) {
    http = new KvbHttp({ url: SERVER, token: token || undefined, cache: 'no-store', retries: 0, timeoutMs: 0 });
    clients.set(token, http);
  }
  return http;
}

/** Runs one client call, an error answer thrown as the console's ApiError (webhook-api.ts calls through it too). */
export async function call<T>(credential: string | undefined, run: (http: KvbHttp) => Promise<T>): Promise<T> {
  try {
    return await run(client(credential));
  } catch (err) {
    if (err instanceof KvbHttpError) throw new ApiError(err.status, err.kind, err.detail ?? '');
    throw err;
  }
}

/** A streamed answer read whole. */
async function bytesOf(body: BodyStream): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  let length = 0;
  for await (const chunk of body) {
    chunks.push(chunk);
    length += chunk.length;
  }
  const bytes = new Uint8Array(length);
  let at = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, at);
    at += chunk.length;
  }
  return bytes;
}

/** A bucket's policy, typed once for the client library and the console (a type: no client code is bundled). */
export type Policy = BucketPolicy;

export interface NewBucket {
  email: string;
  secret_key?: string;
  read_key?: string;
  write_key?: string;
  signing_key?: string;
  default_ttl?: string;
  /** The operator's bucket-creation key, when the server requires one. */
  creationKey?: string;
}

/** POST /api/v1/ (a form): the new bucket's id. */
export async function createBucket({ creationKey, default_ttl, ...fields }: NewBucket): Promise<string> {
  // An empty field is left out, as if never typed (the form checked the TTL is digits).
  const given: CreateBucketFields = { email: fields.email };
  for (const name of ['secret_key', 'read_key', 'write_key', 'signing_key'] as const) if (fields[name]) given[name] = fields[name];
  if (default_ttl) given.default_ttl = Number(default_ttl);
  return call(creationKey, (http) => http.createBucket(given));
}

/** GET /api/v1/{bucket}: the policy (admin only). */
export async function getPolicy(c: Connection): Promise<Policy> {
  return call(c.credential, (http) => http.policy(c.bucket));
}

export type BucketPatch = Partial<Record<'secret_key' | 'read_key' | 'write_key' | 'signing_key', string | null>> & {
  default_ttl?: number;
};

/** PATCH /api/v1/{bucket}: set, rotate or clear (null) keys, change the default TTL. */
export async function updateBucket(c: Connection, patch: BucketPatch): Promise<void> {
  await call(c.credential, (http) => http.updateBucket(c.bucket, patch as BucketChanges));
}

/** DELETE /api/v1/{bucket}. */
export async function deleteBucket(c: Connection): Promise<void> {
  await call(c.credential, (http) => http.deleteBucket(c.bucket));
}

/** POST /api/v1/{bucket}/tokens/: a temporary token. */
export async function mintToken(c: Connection, prefix: string, permissions: Permission[], ttl: number): Promise<string> {
  return (await call(c.credential, (http) => http.mintToken(c.bucket, { prefix, permissions, ttl }))).access_token;
}

/** What the listing's `meta=true` says about a key: the row's badges. */
export interface KeyMeta {
  type: ValueType;
  /** The stored value's length in bytes. */
  size: number;
  /** Epoch ms, or null when the key never expires. */
  expiresAt: number | null;
  rev: number;
}

export interface KeyPage {
  keys: string[];
  /** Each key's metadata, when asked for (`meta`). */
  metas: Map<string, KeyMeta>;
  /** Where the next page starts (the server's `Kvb-Next-Cursor`); undefined on the last page. Opaque to callers. */
  next: string | undefined;
  /** The bucket revision the page was read at (`Kvb-Revision`): a watch from it misses nothing. */
  revision: number;
  /**
   * With a delimiter, the entries of `keys` that are folders (the server's `{"prefix"}` items);
   * undefined when the server folded nothing (a kvb without folder listings answers plain keys).
   */
  folders?: Set<string>;
}

interface MetaItem {
  key: string;
  type: ValueType;
  size: number;
  expires_at: string | null;
  rev: number;
}

/**
 * One page of keys under a prefix, in byte order, continued by the server's cursor (a seek to the
 * last key, so every page costs the same however deep). With `meta`, each key's type, size,
 * expiry and revision come in the same answer (the listing's `meta=true`, which needs read).
 */
export async function listKeys(
  c: Connection,
  prefix: string,
  cursor: string | undefined,
  limit: number,
  meta = false,
  delimiter?: string,
): Promise<KeyPage> {
  // With a delimiter, the server folds each folder into one item, seeking past its keys instead of sending them.
  const page = await call(c.credential, async (http) => {
    const answer = await http.listPage(c.bucket, { format: 'json', prefix, limit, meta: meta || undefined, cursor, delimiter });
    return { ...answer, text: new TextDecoder().decode(await bytesOf(answer.body)) };
  });
  const items = JSON.parse(page.text) as Array<string | MetaItem | { key: string } | { prefix: string }>;
  const keys: string[] = [];
  const metas = new Map<string, KeyMeta>();
  let folders: Set<string> | undefined;
  for (const item of items) {
    if (typeof item === 'string') {
      keys.push(item);
      continue;
    }
    if ('prefix' in item) {
      keys.push(item.prefix);
      (folders ??= new Set()).add(item.prefix);
      continue;
    }
    keys.push(item.key);
    if (!('type' in item)) {
      folders ??= new Set();
      continue;
    }
    metas.set(item.key, {
      type: item.type,
      size: item.size,
      expiresAt: item.expires_at === null ? null : Date.parse(item.expires_at),
      rev: item.rev,
    });
  }
  return {
    keys,
    metas,
    next: page.nextCursor,
    revision: page.revision ?? 0,
    ...(folders && { folders }),
  };
}

/** One key's metadata from a one-key listing (no value read), or undefined when it is gone. */
export async function keyMeta(c: Connection, key: string): Promise<KeyMeta | undefined> {
  return (await listKeys(c, key, undefined, 1, true)).metas.get(key);
}

/** Whether the credential may list (GET ?limit=0: lists nothing). */
export async function canList(c: Connection, withValues: boolean): Promise<boolean> {
  return allowed(() => emptyListing(c, withValues));
}

/** A listing of nothing (`limit=0`): whether the credential may list, asked cheaply. */
function emptyListing(c: Connection, values: boolean): Promise<Uint8Array> {
  return call(c.credential, async (http) => bytesOf((await http.listPage(c.bucket, { format: 'json', limit: 0, values })).body));
}

/**
 * A `ttl` of the right shape (digits) but out of range: the route checks its range only after the
 * permission, so an allowed writer gets 400 and nothing is stored. (A negative ttl fails the
 * query schema, before any credential is looked at: every caller got 400, a wrong one too.)
 */
const PROBE_TTL = 1e20;

/** Whether the credential may write under `key`, asked without writing (see PROBE_TTL). */
export async function canWrite(c: Connection, key: string): Promise<boolean> {
  try {
    await call(c.credential, (http) => http.set(c.bucket, key, new Uint8Array(), { ttl: PROBE_TTL }));
    return true;
  } catch (err) {
    if (err instanceof ApiError && err.status === 400) return true;
    if (err instanceof ApiError && (err.status === 401 || err.status === 403)) return false;
    throw err;
  }
}

async function allowed(request: () => Promise<unknown>): Promise<boolean> {
  try {
    await request();
    return true;
  } catch (err) {
    if (err instanceof ApiError && (err.status === 401 || err.status === 403)) return false;
    throw err;
  }
}

/**
 * Refuses (401, said plainly) a credential the bucket does not know, with one cheap request (an
 * empty listing). A known credential without the permission gets 403, which is fine here; the
 * bucket does not know one that gets 401, whatever anonymous callers may do.
 */
export async function checkCredential(c: Connection): Promise<void> {
  try {
    await emptyListing(c, false);
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) {
      throw new ApiError(
        401,
        'unauthorized',
        'this credential is not valid for this bucket (not its secret, read or write key, nor a token of it)',
      );
    }
    if (!(err instanceof ApiError && err.status === 403)) throw err;
  }
}

export interface StoredEntry {
  key: string;
  type: ValueType;
  bytes: Uint8Array;
  /** Epoch ms, or null when the key never expires. */
  expiresAt: number | null;
  /** The key's revision (its ETag): an edit saves with `If-Match` on it. */
  rev: number;
}

/** GET /api/v1/{bucket}/{key}: the stored bytes, their type, expiry and revision. */
export async function getEntry(c: Connection, key: string): Promise<StoredEntry> {
  const read = await call(c.credential, (http) => http.get(c.bucket, key));
  return storedEntry(key, read, read.revision ?? 0);
}

function storedEntry(key: string, read: ValueRead, rev: number): StoredEntry {
  const expiresAt = read.expiresAt ? Date.parse(read.expiresAt) : null;
  return { key, type: read.type ?? 'bytes', bytes: read.data, expiresAt, rev };
}

/** The Content-Type that makes the server store `type` (numbers: none, so the number grammar decides). */
const SET_CONTENT_TYPES: Record<ValueType, string | undefined> = {
  json: 'application/json',
  text: 'text/plain; charset=utf-8',
  int64: undefined,
  float64: undefined,
  bytes: 'application/octet-stream',
};

/**
 * A save's precondition: the key is still at the revision the user opened (`rev`), or is still
 * absent (`absent`, a new key). A failed one is a 412 (ApiError), and nothing is written.
 */
export type SaveCondition = { rev: number } | { absent: true };

/** POST /api/v1/{bucket}/{key}: stores `bytes` as `type`; `ttl` undefined means the bucket default. */
export async function setEntry(
  c: Connection,
  key: string,
  type: ValueType,
  bytes: Uint8Array,
  ttl: number | undefined,
  condition?: SaveCondition,
): Promise<void> {
  const when = condition && ('rev' in condition ? { ifRevision: condition.rev } : { ifAbsent: true });
  await call(c.credential, (http) =>
    http.set(c.bucket, key, bytes, { method: 'POST', contentType: SET_CONTENT_TYPES[type], ttl, condition: when }),
  );
}

/** PATCH /api/v1/{bucket}/{key}: adds a signed delta; answers the new value as text. */
export async function addToCounter(c: Connection, key: string, delta: number): Promise<string> {
  const read = await call(c.credential, (http) => http.incr(c.bucket, key, delta < 0 ? String(delta) : `+${delta}`));
  return new TextDecoder().decode(read.data);
}

/** DELETE /api/v1/{bucket}/{key}. */
export async function deleteEntry(c: Connection, key: string): Promise<void> {
  await call(c.credential, (http) => http.del(c.bucket, key));
}

/** POST /api/v1/{bucket} {"txn": [...]}: deletes every key in one transaction (at most MAX_TXN_OPS). */
export async function deleteEntries(c: Connection, keys: string[]): Promise<void> {
  if (keys.length > MAX_TXN_OPS) throw new ApiError(400, 'bad_request', `at most ${MAX_TXN_OPS} keys in one transaction`);
  const txn = keys.map((key) => ({ delete: key }));
  await call(c.credential, (http) => http.txn(c.bucket, JSON.stringify({ txn })));
}

/** One event of the watch feed (see docs/http-api.md "Watching changes"). */
export type WatchEvent =
  | { type: 'sync'; rev: number }
  | { type: 'progress'; rev: number }
  | { type: 'set'; key: string; rev: number; value_type: ValueType; expires_at: string | null }
  | { type: 'delete'; key: string; rev: number }
  | { type: 'expire'; key: string; rev: number }
  | { type: 'reset'; rev: number; oldest?: number; reason?: string }
  | { type: 'closed'; reason: string };

/**
 * Follows the watch feed of a prefix (`?watch=true&format=jsonl`) with fetch, so the credential
 * goes in the Authorization header as in every other call (EventSource could only put it in the
 * URL, where proxies and logs keep it). Resolves when the stream ends (after `reset` or `closed`,
 * or a dropped connection: the caller resumes with `since`); rejects on an error answer or a
 * network failure; aborting `signal` closes it.
 */
export async function watchKeys(
  c: Connection,
  prefix: string,
  since: number | undefined,
  onEvent: (event: WatchEvent) => void,
  signal: AbortSignal,
): Promise<void> {
  await call(c.credential, async (http) => {
    const decoder = new TextDecoder();
    let buffered = '';
    for await (const chunk of await http.watch(c.bucket, { prefix, since }, { signal })) {
      buffered += decoder.decode(chunk, { stream: true });
      const lines = buffered.split('\n');
      buffered = lines.pop()!;
      for (const line of lines) if (line) onEvent(JSON.parse(line) as WatchEvent);
    }
  });
}

/** The file name an export of `prefix` is saved as. */
export const exportFileName = (c: Connection, prefix: string) =>
  `kvb-${c.bucket}${prefix ? `-${prefix.replace(/[^\w.-]+/g, '_')}` : ''}.jsonl`;

/** GET /api/v1/{bucket}/?export=true&prefix=P: every live key under the prefix, as NDJSON bytes. */
export async function exportKeys(c: Connection, prefix: string): Promise<Uint8Array> {
  return call(c.credential, async (http) => bytesOf(await http.exportBucket(c.bucket, prefix)));
}

export interface ImportOutcome {
  imported: number;
  skipped: number;
}

/** POST /api/v1/{bucket}?prefix=P (NDJSON): imports an export, all or nothing; `onProgress` gets the fraction sent. */
export async function importKeys(
  c: Connection,
  prefix: string,
  file: Blob,
  mode: 'merge' | 'replace',
  onProgress: (fraction: number) => void,
): Promise<ImportOutcome> {
  const result = await call(c.credential, (http) => http.importBucket(c.bucket, file, { mode, prefix, onUploadProgress: onProgress }));
  return { imported: result.imported, skipped: result.skipped };
}

/** One of a key's recorded changes (`?history=true`), newest first. */
export interface HistoryItem {
  rev: number;
  operation: string;
  time: string;
  /** null after a delete or expiry. */
  type: ValueType | null;
  size: number | null;
  expires_at: string | null;
  /** Who made it; null for changes recorded before kvb kept actors. */
  actor: { kind: string; token_id: string | null; address: string | null } | null;
}

/** GET /api/v1/{bucket}/{key}?history=true: up to `limit` of the key's recorded changes, newest first. */
export async function keyHistory(c: Connection, key: string, limit = 100): Promise<HistoryItem[]> {
  return (await call(c.credential, (http) => http.history(c.bucket, key, { limit }))).lines;
}

/** GET /api/v1/{bucket}/{key}?rev=N: the key's exact bytes and type as they were at revision N. */
export async function getEntryAt(c: Connection, key: string, rev: number): Promise<StoredEntry> {
  return storedEntry(key, await call(c.credential, (http) => http.get(c.bucket, key, { revision: rev })), rev);
}
