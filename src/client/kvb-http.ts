import { isValueType, type ValueType } from '../values/value-type.js';
import type { BucketPolicy } from './bucket-policy.js';
import { KvbTimeoutError, httpErrorFor, networkErrorFor, retryAfterSeconds, revisionOf } from './client-errors.js';

// The one module that knows kvb's HTTP API: every URL, header and status is read or written here.
// It needs nothing but a fetch (the platform's, or the CLI's undici transport) and runs unchanged
// in Node, browsers, Deno and Bun: no node: imports, no Buffer.

/** Where a client connects when it is told nowhere (the CLI's default, and connectFromEnv's without KVB_URL). */
export const DEFAULT_URL = 'http://127.0.0.1:8080';

/** A request body: text, bytes, or a stream of bytes (streamed as it is produced). */
export type RequestBody = string | Uint8Array | ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>;

/** What the client passes to `fetch`. */
export interface FetchInit {
  method: string;
  headers: Record<string, string>;
  body?: RequestBody | undefined;
  signal?: AbortSignal | undefined;
  /** Needed by fetch for a streamed request body. */
  duplex?: 'half';
}

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

/** One of a key's recorded changes (`?history=true`), as the server's JSONL line has it. */
export interface HistoryLine {
  rev: number;
  operation: 'set' | 'delete' | 'expire' | 'counter' | 'transaction' | 'import' | 'rollback';
  time: string;
  type: ValueType | null;
  size: number | null;
  expires_at: string | null;
  value?: unknown;
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
}

/** A write that applies only in a given state of the key: at a revision, absent, or live. */
export interface WriteCondition {
  ifRevision?: number | undefined;
  ifAbsent?: boolean | undefined;
  ifExists?: boolean | undefined;
}

/** The RFC 9110 conditional headers for a write condition. */
export function conditionHeaders(condition: WriteCondition = {}): Record<string, string> {
  if (condition.ifRevision !== undefined) return { 'if-match': `"${condition.ifRevision}"` };
  if (condition.ifAbsent) return { 'if-none-match': '*' };
  if (condition.ifExists) return { 'if-match': '*' };
  return {};
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
}

export interface TokenRequest {
  prefix: string;
  permissions: string[];
  ttl: number;
}

/** The outcome of a transaction: committed at a revision, or refused by its failed checks (their indices). */
export type TxnOutcome =
  /** `results`: the JSON text of a 200 answer (a transaction with a get or a delete_prefix). */
  | { ok: true; revision: number | undefined; results?: string }
  | { ok: false; failedChecks: number[] };

type Method = 'GET' | 'HEAD' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

interface Call extends CallOptions {
  method: Method;
  path: string;
  /** Names what was asked, for error messages. */
  subject: string;
  query?: Record<string, string | number | boolean | undefined>;
  headers?: Record<string, string>;
  body?: RequestBody | undefined;
  /** Send the Bearer credential (everything but /health). */
  auth?: boolean;
  /**
   * Safe to send again after a 429 or 503: reads, PUT and DELETE of a key, the policy calls that set
   * fields. Never a POST (a transaction, an import, a counter PATCH): repeating those is not the
   * caller's decision to take silently.
   */
  idempotent?: boolean;
  /** The answer's body is streamed to the caller: the timeout ends once the headers are in. */
  stream?: boolean;
  /** Statuses that are answers, not errors, for this call (a 409 of a transaction with checks). */
  accept?: number[];
}

/** A 2xx answer with its body: buffered (`data`), or streamed (`body`) for streaming calls. */
interface Answer {
  status: number;
  headers: FetchResponse['headers'];
  data: Uint8Array;
  body: BodyStream;
}

/** Only the per-call settings of an options object (callers pass their own wider options). */
const callOf = (options: CallOptions): CallOptions => ({ signal: options.signal, timeoutMs: options.timeoutMs });

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const EMPTY = new Uint8Array(0);
const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    const onAbort = () => (clearTimeout(timer), reject(signal?.reason));
    const timer = setTimeout(() => (signal?.removeEventListener('abort', onAbort), resolve()), ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });

/** A web ReadableStream as an async iterable (Safari's has no Symbol.asyncIterator). */
export function chunksOf(body: FetchResponse['body']): BodyStream {
  if (body === null) return (async function* () {})();
  if (Symbol.asyncIterator in body) return body as AsyncIterable<Uint8Array>;
  const stream = body as ReadableStream<Uint8Array>;
  return {
    async *[Symbol.asyncIterator]() {
      const reader = stream.getReader();
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) return;
          yield value;
        }
      } finally {
        await reader.cancel().catch(() => undefined);
      }
    },
  };
}

/** One method per kvb route, taking the bucket per call. Builds every URL and turns every error answer into a typed error. */
export class KvbHttp {
  readonly url: string;
  private readonly base: URL;
  private readonly token: string | undefined;
  private readonly fetch: FetchLike;
  private readonly timeoutMs: number;
  private readonly retries: number;
  private readonly maxRetryDelayMs: number;

  constructor(options: HttpOptions) {
    this.url = options.url.replace(/\/+$/, '');
    this.base = new URL(this.url);
    this.token = options.token;
    this.fetch = options.fetch ?? ((url, init) => globalThis.fetch(url, init as RequestInit));
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.retries = options.retries ?? 2;
    this.maxRetryDelayMs = options.maxRetryDelayMs ?? 10_000;
  }

  private bucketPath(bucket: string): string {
    return `/api/v1/${encodeURIComponent(bucket)}`;
  }

  private keyPath(bucket: string, key: string): string {
    return `${this.bucketPath(bucket)}/${encodeURIComponent(key)}`;
  }

  /** Sends one request, retrying an idempotent one after 429/503; resolves with a 2xx (or accepted) answer, throws a typed error otherwise. */
  private async send(call: Call): Promise<Answer> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.attempt(call);
      } catch (err) {
        const retryable = err instanceof Error && 'status' in err && (err.status === 429 || err.status === 503);
        if (!retryable || !call.idempotent || attempt >= this.retries || call.signal?.aborted) throw err;
        const after = retryAfterSeconds((err as { headers?: Record<string, string> }).headers?.['retry-after']);
        const delay = after !== undefined ? after * 1000 : Math.min(this.maxRetryDelayMs, 100 * 2 ** attempt);
        if (delay > this.maxRetryDelayMs) throw err;
        await sleep(delay * (after !== undefined ? 1 : 0.5 + Math.random() / 2), call.signal);
      }
    }
  }

  private async attempt(call: Call): Promise<Answer> {
    const query = new URLSearchParams();
    for (const [name, value] of Object.entries(call.query ?? {})) {
      if (value !== undefined && value !== false) query.set(name, String(value));
    }
    const prefix = this.base.pathname.replace(/\/+$/, '');
    const search = query.toString();
    const url = `${this.base.origin}${prefix}${call.path}${search ? `?${search}` : ''}`;
    const headers: Record<string, string> = { ...call.headers };
    if (call.auth !== false && this.token) headers.authorization = `Bearer ${this.token}`;
    if (call.signal?.aborted) throw call.signal.reason;
    const timeoutMs = call.timeoutMs ?? this.timeoutMs;
    // One controller per attempt: the caller's signal and the deadline both abort it.
    const controller = new AbortController();
    let timedOut = false;
    const timer = timeoutMs > 0 ? setTimeout(() => ((timedOut = true), controller.abort()), timeoutMs) : undefined;
    const onAbort = () => controller.abort(call.signal?.reason);
    call.signal?.addEventListener('abort', onAbort, { once: true });
    const done = () => {
      clearTimeout(timer);
      call.signal?.removeEventListener('abort', onAbort);
    };
    const failed = (err: unknown): unknown => {
      done();
      if (timedOut) return new KvbTimeoutError(this.url, timeoutMs);
      if (call.signal?.aborted) return call.signal.reason;
      return networkErrorFor(this.url, err);
    };
    const body = call.body;
    const streamed = body !== undefined && typeof body !== 'string' && !(body instanceof Uint8Array);
    let response: FetchResponse;
    try {
      response = await this.fetch(url, {
        method: call.method,
        headers,
        body,
        signal: controller.signal,
        ...(streamed && { duplex: 'half' as const }),
      });
    } catch (err) {
      throw failed(err);
    }
    const ok = (response.status >= 200 && response.status < 400) || call.accept?.includes(response.status);
    if (ok && call.stream) {
      // The deadline covered the wait for the answer; the stream runs as long as the caller reads.
      clearTimeout(timer);
      const chunks = chunksOf(response.body);
      const self = this;
      return {
        status: response.status,
        headers: response.headers,
        data: EMPTY,
        body: {
          async *[Symbol.asyncIterator]() {
            try {
              for await (const chunk of chunks) yield chunk;
            } catch (err) {
              throw call.signal?.aborted ? call.signal.reason : networkErrorFor(self.url, err);
            } finally {
              call.signal?.removeEventListener('abort', onAbort);
              // Stopping early (break, return) drops the connection instead of reading on.
              controller.abort();
            }
          },
        },
      };
    }
    let data: Uint8Array;
    try {
      // Read even when empty (HEAD): an unread body can hold the connection.
      data = new Uint8Array(await response.arrayBuffer());
    } catch (err) {
      throw failed(err);
    }
    done();
    if (ok) return { status: response.status, headers: response.headers, data, body: (async function* () {})() };
    let kind: string | undefined;
    let detail: string | undefined;
    try {
      const error = (JSON.parse(decoder.decode(data)) as { error?: { message?: string; detail?: string } }).error;
      kind = error?.message;
      detail = error?.detail;
    } catch {
      kind = undefined;
    }
    const errorHeaders: Record<string, string> = {};
    for (const name of ['etag', 'retry-after', 'kvb-failed-checks', 'www-authenticate', 'kvb-revision', 'kvb-history-floor']) {
      const value = response.headers.get(name);
      if (value !== null) errorHeaders[name] = value;
    }
    throw httpErrorFor(response.status, kind, call.subject, detail ?? response.headers.get('kvb-error-detail') ?? undefined, errorHeaders);
  }

  private json<T>(answer: Answer): T {
    return JSON.parse(decoder.decode(answer.data)) as T;
  }

  async health(options: CallOptions = {}): Promise<Health> {
    return this.json(await this.send({ ...callOf(options), method: 'GET', path: '/health', subject: 'health check', auth: false, idempotent: true }));
  }

  /** Creates a bucket; resolves with its id. The token, if any, is the operator's bucket-creation key. */
  async createBucket(fields: CreateBucketFields, options: CallOptions = {}): Promise<string> {
    const form = new URLSearchParams();
    for (const [name, value] of Object.entries(fields)) if (value !== undefined) form.set(name, String(value));
    const answer = await this.send({
      ...callOf(options),
      method: 'POST',
      path: '/api/v1/',
      subject: 'create bucket',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: form.toString(),
    });
    return decoder.decode(answer.data).trim();
  }

  async policy(bucket: string, options: CallOptions = {}): Promise<BucketPolicy> {
    return (await this.policyAndUsage(bucket, options)).policy;
  }

  /** The policy projection, and the usage the server sends beside it in headers (absent from servers before quotas). */
  async policyAndUsage(bucket: string, options: CallOptions = {}): Promise<{ policy: BucketPolicy; usage?: BucketUsage }> {
    const answer = await this.send({ ...callOf(options), method: 'GET', path: this.bucketPath(bucket), subject: `bucket ${bucket}`, idempotent: true });
    const policy = this.json<BucketPolicy>(answer);
    const number = (name: string) => {
      const text = answer.headers.get(name);
      return text === null ? undefined : Number(text);
    };
    const keys = number('kvb-usage-keys');
    const bytes = number('kvb-usage-bytes');
    if (keys === undefined || bytes === undefined) return { policy };
    return {
      policy,
      usage: {
        keys,
        bytes,
        quotaKeys: number('kvb-quota-keys'),
        quotaBytes: number('kvb-quota-bytes'),
        historyFloor: number('kvb-history-floor'),
        revision: number('kvb-revision'),
      },
    };
  }

  /** HEAD on the bucket: true with admin access to an existing bucket, false on 404. */
  async bucketExists(bucket: string, options: CallOptions = {}): Promise<boolean> {
    try {
      await this.send({ ...callOf(options), method: 'HEAD', path: this.bucketPath(bucket), subject: `bucket ${bucket}`, idempotent: true });
      return true;
    } catch (err) {
      if (err instanceof Error && 'status' in err && err.status === 404) return false;
      throw err;
    }
  }

  async updateBucket(bucket: string, changes: BucketChanges, options: CallOptions = {}): Promise<void> {
    await this.send({
      ...callOf(options),
      method: 'PATCH',
      path: this.bucketPath(bucket),
      subject: `bucket ${bucket}`,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(changes),
      // Setting fields to given values: the same request twice leaves the same policy.
      idempotent: true,
    });
  }

  async deleteBucket(bucket: string, options: CallOptions = {}): Promise<void> {
    await this.send({ ...callOf(options), method: 'DELETE', path: this.bucketPath(bucket), subject: `bucket ${bucket}`, idempotent: true });
  }

  /** Sets a key with PUT (idempotent). Without a contentType the server infers the type, as it does for curl. */
  async set(
    bucket: string,
    key: string,
    body: string | Uint8Array,
    options: CallOptions & { contentType?: string | undefined; ttl?: number | undefined; condition?: WriteCondition | undefined } = {},
  ): Promise<ValueRead> {
    const answer = await this.send({
      ...callOf(options),
      method: 'PUT',
      path: this.keyPath(bucket, key),
      subject: `key ${JSON.stringify(key)} in bucket ${bucket}`,
      query: { ttl: options.ttl },
      headers: { ...(options.contentType && { 'content-type': options.contentType }), ...conditionHeaders(options.condition) },
      // Bytes, never a string: fetch would add `Content-Type: text/plain`, which is evidence of text.
      body: typeof body === 'string' ? encoder.encode(body) : body,
      idempotent: true,
    });
    return valueRead(answer);
  }

  /** The key's value; with `revision`, as it was at that revision (history). */
  async get(bucket: string, key: string, options: CallOptions & { revision?: number | undefined } = {}): Promise<ValueRead> {
    return valueRead(
      await this.send({
        ...callOf(options),
        method: 'GET',
        path: this.keyPath(bucket, key),
        subject: `key ${JSON.stringify(key)} in bucket ${bucket}`,
        query: { rev: options.revision },
        idempotent: true,
      }),
    );
  }

  /** One page of a key's recorded changes, newest first, and the cursor of the next page. */
  async history(
    bucket: string,
    key: string,
    page: { limit?: number | undefined; cursor?: string | undefined; values?: boolean | undefined } = {},
    options: CallOptions = {},
  ): Promise<{ lines: HistoryLine[]; nextCursor: string | undefined; floor: number | undefined }> {
    const answer = await this.send({
      ...callOf(options),
      method: 'GET',
      path: this.keyPath(bucket, key),
      subject: `history of key ${JSON.stringify(key)} in bucket ${bucket}`,
      query: { history: true, values: page.values, limit: page.limit, cursor: page.cursor },
      idempotent: true,
    });
    const text = new TextDecoder().decode(answer.data);
    return {
      lines: text.split('\n').filter(Boolean).map((line) => JSON.parse(line) as HistoryLine),
      nextCursor: answer.headers.get('kvb-next-cursor') ?? undefined,
      floor: revisionOf(answer.headers.get('kvb-history-floor')),
    };
  }

  /** Rolls the bucket (or a prefix) back to its state at `revision` as one new revision; `dryRun` only tells what would change. Never retried. */
  async rollback(
    bucket: string,
    revision: number,
    rollback: { prefix?: string | undefined; dryRun?: boolean | undefined } = {},
    options: CallOptions = {},
  ): Promise<RollbackResult> {
    const answer = await this.send({
      ...callOf(options),
      method: 'POST',
      path: this.bucketPath(bucket),
      subject: `rollback of bucket ${bucket}`,
      query: { rollback: revision, prefix: rollback.prefix || undefined, dry_run: rollback.dryRun || undefined },
      ...(rollback.dryRun && { idempotent: true }),
    });
    return this.json<RollbackResult>(answer);
  }

  /** Deletes a key; resolves with the revision of the commit. */
  async del(bucket: string, key: string, condition?: WriteCondition, options: CallOptions = {}): Promise<number | undefined> {
    const answer = await this.send({
      ...callOf(options),
      method: 'DELETE',
      path: this.keyPath(bucket, key),
      subject: `key ${JSON.stringify(key)} in bucket ${bucket}`,
      headers: conditionHeaders(condition),
      idempotent: true,
    });
    return revisionOf(answer.headers.get('kvb-revision'));
  }

  /** Counter PATCH with a signed delta (`+1`, `-2.5`); resolves with the new value as text. Never retried. */
  async incr(bucket: string, key: string, delta: string, ttl?: number, condition?: WriteCondition, options: CallOptions = {}): Promise<ValueRead> {
    const answer = await this.send({
      ...callOf(options),
      method: 'PATCH',
      path: this.keyPath(bucket, key),
      subject: `key ${JSON.stringify(key)} in bucket ${bucket}`,
      query: { ttl },
      headers: { 'content-type': 'text/plain', ...conditionHeaders(condition) },
      body: encoder.encode(delta),
    });
    return valueRead(answer);
  }

  /** One page of keys and the cursor that continues after it (see `Kvb-Next-Cursor`); the body streams. */
  async listPage(bucket: string, list: ListOptions, options: CallOptions = {}): Promise<ListPage> {
    const answer = await this.send({
      ...callOf(options),
      method: 'GET',
      path: `${this.bucketPath(bucket)}/`,
      subject: `bucket ${bucket}`,
      query: {
        prefix: list.prefix || undefined,
        limit: list.limit,
        skip: list.skip,
        reverse: list.reverse,
        values: list.values,
        meta: list.meta,
        format: list.format,
        cursor: list.cursor,
        rev: list.revision,
        delimiter: list.delimiter,
      },
      idempotent: true,
      stream: true,
    });
    return {
      body: answer.body,
      nextCursor: answer.headers.get('kvb-next-cursor') ?? undefined,
      revision: revisionOf(answer.headers.get('kvb-revision')),
    };
  }

  /** Exports the bucket (or a prefix) as the NDJSON export format, streamed. */
  async exportBucket(bucket: string, prefix?: string, options: CallOptions = {}): Promise<BodyStream> {
    const answer = await this.send({
      ...callOf(options),
      method: 'GET',
      path: `${this.bucketPath(bucket)}/`,
      subject: `export of bucket ${bucket}`,
      query: { export: true, prefix: prefix || undefined },
      idempotent: true,
      stream: true,
    });
    return answer.body;
  }

  /** Imports an export (streamed from `body`); all or nothing on the server. Never retried (the body is consumed). */
  async importBucket(
    bucket: string,
    body: RequestBody,
    options: CallOptions & { mode?: 'merge' | 'replace' | undefined; prefix?: string | undefined } = {},
  ): Promise<ImportResult> {
    return this.json(
      await this.send({
        ...callOf(options),
        method: 'POST',
        path: this.bucketPath(bucket),
        subject: `import into bucket ${bucket}`,
        query: { mode: options.mode, prefix: options.prefix || undefined },
        headers: { 'content-type': 'application/x-ndjson' },
        body,
      }),
    );
  }

  /** Opens a watch stream (JSONL, one event per line), streamed as it arrives. Not retried here: the caller resumes. */
  async watch(
    bucket: string,
    watch: { prefix?: string | undefined; since?: number | undefined; values?: boolean | undefined },
    options: CallOptions = {},
  ): Promise<BodyStream> {
    const answer = await this.send({
      ...callOf(options),
      method: 'GET',
      path: `${this.bucketPath(bucket)}/`,
      subject: `bucket ${bucket}`,
      query: { watch: true, prefix: watch.prefix || undefined, since: watch.since, values: watch.values, format: 'jsonl' },
      stream: true,
    });
    return answer.body;
  }

  /** Commits `{"txn":[…]}` given as JSON text (sent exactly as written, so numbers keep their precision). Never retried. */
  async txn(bucket: string, json: string, options: CallOptions & { acceptConflict?: boolean } = {}): Promise<TxnOutcome> {
    const answer = await this.send({
      ...callOf(options),
      method: 'POST',
      path: this.bucketPath(bucket),
      subject: `transaction in bucket ${bucket}`,
      headers: { 'content-type': 'application/json' },
      body: encoder.encode(json),
      // Failed checks are an answer for atomic().commit(), an error for the CLI.
      accept: options.acceptConflict ? [409] : undefined,
    });
    if (answer.status === 409) {
      const failed = answer.headers.get('kvb-failed-checks') ?? '';
      return { ok: false, failedChecks: failed.split(',').filter((s) => /^\d+$/.test(s.trim())).map(Number) };
    }
    const revision = revisionOf(answer.headers.get('kvb-revision'));
    return answer.status === 200 ? { ok: true, revision, results: decoder.decode(answer.data) } : { ok: true, revision };
  }

  async mintToken(bucket: string, request: TokenRequest, options: CallOptions = {}): Promise<{ access_token: string }> {
    const form = new URLSearchParams({ prefix: request.prefix, permissions: request.permissions.join(','), ttl: String(request.ttl) });
    return this.json(
      await this.send({
        ...callOf(options),
        method: 'POST',
        path: `${this.bucketPath(bucket)}/tokens/`,
        subject: `token for bucket ${bucket}`,
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: form.toString(),
      }),
    );
  }
}

function valueRead(answer: Answer): ValueRead {
  const headers = answer.headers;
  return {
    data: answer.data,
    type: typeOf(headers.get('kvb-type')),
    contentType: headers.get('content-type') ?? undefined,
    expiresAt: headers.get('kvb-expires-at') ?? undefined,
    revision: revisionOf(headers.get('kvb-revision') ?? headers.get('etag')),
  };
}

const typeOf = (text: string | null): ValueType | undefined => (text !== null && isValueType(text) ? text : undefined);
