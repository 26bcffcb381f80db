import { KvbTimeoutError, httpErrorFor, networkErrorFor, retryAfterSeconds } from './client-errors.js';
import type { BodyStream, CallOptions, FetchLike, FetchResponse, HttpOptions, RequestBody } from './http-types.js';
import { uploadWithProgress } from './upload-progress.js';

// The request core of kvb's HTTP client: URLs, the Bearer credential, deadlines, retries of
// idempotent calls, streamed answers, and every error answer turned into a typed error. It needs
// nothing but a fetch (the platform's, or the CLI's own on Node's http) and runs unchanged in Node,
// browsers, Deno and Bun: no node: imports, no Buffer. The routes are in key-, listing-, bucket-
// and webhook-requests.ts, each a part given the one transport, which KvbHttp (kvb-http.ts) embeds.

type Method = 'GET' | 'HEAD' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export interface Call extends CallOptions {
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
  /** The fraction of the body sent, as it goes in a browser (uploadWithProgress), 1 once answered. */
  onUploadProgress?: ((fraction: number) => void) | undefined;
}

/** A 2xx answer with its body: buffered (`data`), or streamed (`body`) for streaming calls. */
export interface Answer {
  status: number;
  headers: FetchResponse['headers'];
  data: Uint8Array;
  body: BodyStream;
}

/** Only the per-call settings of an options object (callers pass their own wider options). */
export const callOf = (options: CallOptions): CallOptions => ({ signal: options.signal, timeoutMs: options.timeoutMs });

export const bucketPath = (bucket: string): string => `/api/v1/${encodeURIComponent(bucket)}`;
export const keyPath = (bucket: string, key: string): string => `${bucketPath(bucket)}/${encodeURIComponent(key)}`;

const decoder = new TextDecoder();
const EMPTY = new Uint8Array(0);
const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
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

/** Sends kvb's requests for the parts that know the routes (one transport per client). */
export class HttpTransport {
  readonly url: string;
  private readonly base: URL;
  private readonly token: string | undefined;
  private readonly fetch: FetchLike;
  private readonly cache: HttpOptions['cache'];
  private readonly timeoutMs: number;
  private readonly retries: number;
  private readonly maxRetryDelayMs: number;

  constructor(options: HttpOptions) {
    this.url = options.url.replace(/\/+$/, '');
    this.base = new URL(this.url);
    this.token = options.token;
    this.fetch = options.fetch ?? ((url, init) => globalThis.fetch(url, init as RequestInit));
    this.cache = options.cache;
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.retries = options.retries ?? 2;
    this.maxRetryDelayMs = options.maxRetryDelayMs ?? 10_000;
  }

  /** Sends one request, retrying an idempotent one after 429/503; resolves with a 2xx (or accepted) answer, throws a typed error otherwise. */
  async send(call: Call): Promise<Answer> {
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
    const timer =
      timeoutMs > 0
        ? setTimeout(() => {
            timedOut = true;
            controller.abort();
          }, timeoutMs)
        : undefined;
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
    const streamed = body !== undefined && typeof body !== 'string' && !(body instanceof Uint8Array) && !isBlob(body);
    const progress = call.onUploadProgress && !streamed && uploadWithProgress(call.onUploadProgress);
    let response: FetchResponse;
    try {
      response = await (progress || this.fetch)(url, {
        method: call.method,
        headers,
        body,
        signal: controller.signal,
        ...(this.cache && { cache: this.cache }),
        ...(streamed && { duplex: 'half' as const }),
      });
    } catch (err) {
      throw failed(err);
    }
    const ok = (response.status >= 200 && response.status < 400) || call.accept?.includes(response.status);
    if (ok && call.stream) {
      // The deadline covered the wait for the answer; the stream runs as long as the caller reads.
      clearTimeout(timer);
      return streamedAnswer(response, call.signal, this.url, () => {
        call.signal?.removeEventListener('abort', onAbort);
        // Stopping early (break, return) drops the connection instead of reading on.
        controller.abort();
      });
    }
    let data: Uint8Array;
    try {
      // Read even when empty (HEAD): an unread body can hold the connection.
      data = new Uint8Array(await response.arrayBuffer());
    } catch (err) {
      throw failed(err);
    }
    done();
    if (ok) {
      call.onUploadProgress?.(1);
      return { status: response.status, headers: response.headers, data, body: (async function* () {})() };
    }
    throw errorAnswer(response, data, call.subject);
  }
}

/** A 2xx answer whose body is read as the caller iterates it; `end` runs once the caller stops. */
function streamedAnswer(response: FetchResponse, signal: AbortSignal | undefined, url: string, end: () => void): Answer {
  const chunks = chunksOf(response.body);
  return {
    status: response.status,
    headers: response.headers,
    data: EMPTY,
    body: {
      async *[Symbol.asyncIterator]() {
        try {
          for await (const chunk of chunks) yield chunk;
        } catch (err) {
          throw signal?.aborted ? signal.reason : networkErrorFor(url, err);
        } finally {
          end();
        }
      },
    },
  };
}

/** An error answer as its typed error: the envelope's message and detail, and the headers a caller may need. */
function errorAnswer(response: FetchResponse, data: Uint8Array, subject: string): Error {
  let kind: string | undefined;
  let detail: string | undefined;
  try {
    const error = (JSON.parse(decoder.decode(data)) as { error?: { message?: string; detail?: string } }).error;
    kind = error?.message;
    detail = error?.detail;
  } catch {
    kind = undefined;
  }
  const headers: Record<string, string> = {};
  for (const name of ['etag', 'retry-after', 'kvb-failed-checks', 'www-authenticate', 'kvb-revision', 'kvb-history-floor']) {
    const value = response.headers.get(name);
    if (value !== null) headers[name] = value;
  }
  return httpErrorFor(response.status, kind, subject, detail ?? response.headers.get('kvb-error-detail') ?? undefined, headers);
}

export const jsonOf = <T>(answer: Answer): T => JSON.parse(decoder.decode(answer.data)) as T;

const isBlob = (body: RequestBody): body is Blob => typeof Blob === 'function' && body instanceof Blob;
