import type { ValueType } from '../values/value-type.js';
import type { BucketPolicy } from './bucket-policy.js';
import type { HistoryOperation } from '../values/change-kind.js';

// The shapes kvb's HTTP API is spoken in, shared by the transport and the per-resource requests
// (a module of its own, so that none of them imports another for a type).

/** A request body: text, bytes, a Blob (a browser's File), or a stream of bytes (streamed as it is produced). */
export type RequestBody = string | Uint8Array | Blob | ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>;

/** What the client passes to `fetch`. */
export interface FetchInit {
  method: string;
  headers: Record<string, string>;
  body?: RequestBody | undefined;
  signal?: AbortSignal | undefined;
  /** Needed by fetch for a streamed request body. */
  duplex?: 'half';
  cache?: FetchCache;
}

export type FetchCache = 'default' | 'no-store' | 'reload' | 'no-cache' | 'force-cache' | 'only-if-cached';

/** The part of a fetch `Response` the client reads. */
export interface FetchResponse {
  status: number;
  headers: { get(name: string): string | null };
  body: ReadableStream<Uint8Array> | AsyncIterable<Uint8Array> | null;
  text(): Promise<string>;
  arrayBuffer(): Promise<ArrayBuffer>;
}

/** A fetch: the platform's `globalThis.fetch` fits, so does any function with this shape. */
export type FetchLike = {
  // A method signature, so that `fetch` (whose init type is wider) is accepted as is.
  bivariant(url: string, init: FetchInit): Promise<FetchResponse>;
}['bivariant'];

export interface HttpOptions {
  /** Base URL of the server, e.g. `http://127.0.0.1:8080` (a path prefix is kept). */
  url: string;
  /** Sent as `Authorization: Bearer`, never in the URL. */
  token?: string | undefined;
  /** Default `globalThis.fetch`. */
  fetch?: FetchLike | undefined;
  /** fetch's `cache` mode for every call (a browser's HTTP cache: `'no-store'`); unset, fetch's default. */
  cache?: FetchCache | undefined;
  /** Milliseconds a call may take (until its whole answer is read; for streams, until they start). 0 = none. Default 30000. */
  timeoutMs?: number | undefined;
  /** Retries of an idempotent call answered 429 or 503 (honouring Retry-After). Default 2. */
  retries?: number | undefined;
  /** Longest wait between retries, in ms; a longer Retry-After is not waited for. Default 10000. */
  maxRetryDelayMs?: number | undefined;
}

/** Per call: cancel it, or give it its own deadline. */
export interface CallOptions {
  signal?: AbortSignal | undefined;
  /** Overrides the client's timeoutMs for this call. */
  timeoutMs?: number | undefined;
}

export interface Health {
  status: string;
  storage: string;
  version: string;
  /** The largest value the server stores, in bytes (absent from servers before it was added). */
  max_value_bytes?: number;
}

export type { BucketPolicy };

/** What the policy GET's headers say a bucket stores, and the server's per-bucket quotas (undefined: none). */
export interface BucketUsage {
  keys: number;
  bytes: number;
  quotaKeys?: number | undefined;
  quotaBytes?: number | undefined;
  /** History: the oldest revision that can still be read (`Kvb-History-Floor`), and the bucket's revision. */
  historyFloor?: number | undefined;
  revision?: number | undefined;
}

/** What one history page asks for; `prefix`, `since` and `until` only of the bucket's change log. */
export interface HistoryPage {
  limit?: number | undefined;
  cursor?: string | undefined;
  values?: boolean | undefined;
  actor?: string | undefined;
  prefix?: string | undefined;
  /** A revision (changes after it) or an RFC 3339 time (changes at or after it). */
  since?: string | undefined;
  /** A revision or an RFC 3339 time (changes up to and including it). */
  until?: string | undefined;
}

/** One of a key's recorded changes (`?history=true`), as the server's JSONL line has it (`key`: in the bucket's change log). */
export interface HistoryLine {
  rev: number;
  key?: string;
  operation: HistoryOperation;
  time: string;
  type: ValueType | null;
  size: number | null;
  expires_at: string | null;
  /** Who made it: the credential's kind, a token's id and the client address; null for changes recorded before kvb kept them. */
  actor: HistoryActor | null;
  value?: unknown;
}

/** The actor of a history line (`kind`: secret, write, read, anonymous, token, or server for the TTL sweeper's expiries). */
export interface HistoryActor {
  kind: string;
  token_id: string | null;
  address: string | null;
}

/** What a rollback changed (or, dry run, would change). */
export interface RollbackResult {
  rollback_to: number;
  prefix: string;
  dry_run: boolean;
  /** The revision it made (dry run or nothing to change: the bucket's current one). */
  revision: number;
  changed: number;
  changes: Array<{
    key: string;
    action: 'set' | 'delete';
    from: { type: ValueType; size: number; rev: number } | null;
    to: { type: ValueType; size: number } | null;
  }>;
}

export interface CreateBucketFields {
  email: string;
  secret_key?: string | undefined;
  read_key?: string | undefined;
  write_key?: string | undefined;
  signing_key?: string | undefined;
  default_ttl?: number | undefined;
}

/** PATCH fields: a string sets or rotates, null clears, absent leaves unchanged. */
export interface BucketChanges {
  secret_key?: string;
  read_key?: string | null;
  write_key?: string | null;
  signing_key?: string | null;
  default_ttl?: number | null;
}

/** A value as read: its exact bytes and what the server says about it. */
export interface ValueRead {
  data: Uint8Array;
  /** `Kvb-Type`, or undefined from a server that names none (or one this client does not know). */
  type: ValueType | undefined;
  contentType: string | undefined;
  /** RFC 3339, or undefined when the key never expires. */
  expiresAt: string | undefined;
  /** The key's revision (its last change), from `Kvb-Revision`. */
  revision: number | undefined;
  /** The key's create revision (a fencing token), from `Kvb-Create-Revision`: only when the read asked for it. */
  createRevision?: number | undefined;
}

/** A write that applies only in a given state of the key: at a revision, absent, or live. */
export interface WriteCondition {
  ifRevision?: number | undefined;
  ifAbsent?: boolean | undefined;
  ifExists?: boolean | undefined;
}

export interface ListOptions {
  prefix?: string | undefined;
  limit?: number | undefined;
  skip?: number | undefined;
  reverse?: boolean | undefined;
  values?: boolean | undefined;
  /** With values: each key as `{key,type,size,expires_at,value}` (json/jsonl only). */
  meta?: boolean | undefined;
  format: 'text' | 'json' | 'jsonl';
  /** Continue after the page that answered this `Kvb-Next-Cursor`. */
  cursor?: string | undefined;
  /** History: list the bucket as it was at this revision. */
  revision?: number | undefined;
  /** Folders: keys directly under the prefix as `{"key"}` and each deeper folder once as `{"prefix"}` (json/jsonl only). */
  delimiter?: string | undefined;
}

/** A response body, streamed: iterate it for its chunks as they arrive. */
export type BodyStream = AsyncIterable<Uint8Array>;

/** One page of a listing: its body (streamed), the cursor of the next page when keys follow, and the revision it was read at. */
export interface ListPage {
  body: BodyStream;
  nextCursor: string | undefined;
  revision: number | undefined;
}

export interface ImportResult {
  imported: number;
  skipped: number;
  /** The one bucket revision the import committed as. */
  rev: number;
  /** With webhook lines in the file (a secret-key holder's export): each webhook added, with its new signing secret, shown only here. */
  webhooks?: ImportedWebhook[];
}

/** A webhook an import added (the fields of WebhookInfo that say which, and its secret). */
export interface ImportedWebhook {
  id: string;
  url: string;
  prefix: string;
  state: 'active' | 'paused';
  secret: string;
}

export interface TokenRequest {
  prefix: string;
  permissions: string[];
  ttl: number;
}

/** The outcome of a transaction: committed at a revision, or refused by its failed checks (their indices). */
export type TxnOutcome =
  /** `results`: the JSON text of a 200 answer (a transaction with a get or a delete_prefix). */
  { ok: true; revision: number | undefined; results?: string } | { ok: false; failedChecks: number[] };
