import { createRequire } from 'node:module';
import type { Readable } from 'node:stream';
import { setFlagsFromString } from 'node:v8';
import type { Dispatcher } from 'undici';
import { isValueType, type ValueType } from '../values/value-type.js';
import { KvbHttpError, networkErrorFor } from './client-errors.js';

// Start-up time is a feature of a CLI. So: only undici's HTTP/1.1 Client and its request() are
// loaded, not the package index (fetch, WebSocket, caches, mocks, proxies…), and through
// require(), which is cheaper than the ESM loader's CommonJS translation. And since the process
// lives for milliseconds, optimising llhttp's WebAssembly in the background only delays exit.
setFlagsFromString('--liftoff-only');
const require = createRequire(import.meta.url);
const UndiciClient = require('undici/lib/dispatcher/client.js') as typeof import('undici').Client;
const undiciRequest = require('undici/lib/api/api-request.js') as (
  this: Dispatcher,
  options: Dispatcher.RequestOptions,
) => Promise<Dispatcher.ResponseData>;

export interface ClientOptions {
  /** Base URL of the server, e.g. `http://127.0.0.1:8080` (a path prefix is kept). */
  url: string;
  /** Sent as `Authorization: Bearer`, never in the URL. */
  token?: string | undefined;
  timeoutMs?: number;
}

export interface Health {
  status: string;
  storage: string;
  version: string;
}

export interface BucketPolicy {
  default_ttl: number;
  has_secret_key: boolean;
  has_read_key: boolean;
  has_write_key: boolean;
  has_signing_key: boolean;
  signing_key_generation: number;
  anonymous_access: { read: boolean; write: boolean; enumerate: boolean; delete: boolean };
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
  data: Buffer;
  type: ValueType | undefined;
  contentType: string | undefined;
  /** RFC 3339, or undefined when the key never expires. */
  expiresAt: string | undefined;
}

export interface ListOptions {
  prefix?: string | undefined;
  limit?: number | undefined;
  skip?: number | undefined;
  reverse?: boolean | undefined;
  values?: boolean | undefined;
  format: 'text' | 'json' | 'jsonl';
}

export interface TokenRequest {
  prefix: string;
  permissions: string[];
  ttl: number;
}

type Method = 'GET' | 'HEAD' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

interface Call {
  method: Method;
  path: string;
  /** Names what was asked, for error messages. */
  subject: string;
  query?: Record<string, string | number | boolean | undefined>;
  headers?: Record<string, string>;
  body?: string | Buffer;
  /** Send the Bearer credential (everything but /health). */
  auth?: boolean;
}

const header = (headers: Dispatcher.ResponseData['headers'], name: string): string | undefined => {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
};

/** One typed method per kvb route. Builds every URL and turns every error answer into a typed error. */
export class KvbClient {
  readonly url: string;
  private readonly base: URL;
  private readonly dispatcher: Dispatcher;
  private readonly token: string | undefined;

  constructor(options: ClientOptions) {
    this.url = options.url.replace(/\/+$/, '');
    this.base = new URL(this.url);
    this.token = options.token;
    const timeout = options.timeoutMs ?? 30_000;
    this.dispatcher = new UndiciClient(this.base.origin, {
      connect: { timeout: Math.min(timeout, 10_000) },
      headersTimeout: timeout,
      bodyTimeout: timeout,
    });
  }

  /** Drops the connection. Every method has read its whole response by the time it resolves. */
  async close(): Promise<void> {
    await this.dispatcher.destroy().catch(() => undefined);
  }

  private bucketPath(bucket: string): string {
    return `/api/v1/${encodeURIComponent(bucket)}`;
  }

  private keyPath(bucket: string, key: string): string {
    return `${this.bucketPath(bucket)}/${encodeURIComponent(key)}`;
  }

  /** Sends one request; resolves with the response when it is 2xx, throws a typed error otherwise. */
  private async send(call: Call): Promise<Dispatcher.ResponseData> {
    const query = new URLSearchParams();
    for (const [name, value] of Object.entries(call.query ?? {})) {
      if (value !== undefined && value !== false) query.set(name, String(value));
    }
    const prefix = this.base.pathname.replace(/\/+$/, '');
    const path = `${prefix}${call.path}${query.size > 0 ? `?${query}` : ''}`;
    const headers: Record<string, string> = { ...call.headers };
    if (call.auth !== false && this.token) headers.authorization = `Bearer ${this.token}`;
    let response: Dispatcher.ResponseData;
    try {
      response = await undiciRequest.call(this.dispatcher, {
        method: call.method,
        path,
        headers,
        body: call.body ?? null,
      });
    } catch (err) {
      throw networkErrorFor(this.url, err);
    }
    if (response.statusCode < 400) return response;
    const text = await response.body.text().catch(() => '');
    let kind: string | undefined;
    try {
      kind = (JSON.parse(text) as { error?: { message?: string } }).error?.message;
    } catch {
      kind = undefined;
    }
    throw new KvbHttpError(response.statusCode, kind, call.subject, header(response.headers, 'kvb-error-detail'));
  }

  private async sendForBuffer(call: Call): Promise<{ response: Dispatcher.ResponseData; data: Buffer }> {
    const response = await this.send(call);
    try {
      return { response, data: Buffer.from(await response.body.arrayBuffer()) };
    } catch (err) {
      throw networkErrorFor(this.url, err);
    }
  }

  async health(): Promise<Health> {
    const { data } = await this.sendForBuffer({ method: 'GET', path: '/health', subject: 'health check', auth: false });
    return JSON.parse(data.toString('utf8')) as Health;
  }

  /** Creates a bucket; resolves with its id. The token, if any, is the operator's bucket-creation key. */
  async createBucket(fields: CreateBucketFields): Promise<string> {
    const form = new URLSearchParams();
    for (const [name, value] of Object.entries(fields)) if (value !== undefined) form.set(name, String(value));
    const { data } = await this.sendForBuffer({
      method: 'POST',
      path: '/api/v1/',
      subject: 'create bucket',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: form.toString(),
    });
    return data.toString('utf8').trim();
  }

  async policy(bucket: string): Promise<BucketPolicy> {
    const { data } = await this.sendForBuffer({ method: 'GET', path: this.bucketPath(bucket), subject: `bucket ${bucket}` });
    return JSON.parse(data.toString('utf8')) as BucketPolicy;
  }

  /** HEAD on the bucket: true with admin access to an existing bucket, false on 404. */
  async bucketExists(bucket: string): Promise<boolean> {
    try {
      await this.sendForBuffer({ method: 'HEAD', path: this.bucketPath(bucket), subject: `bucket ${bucket}` });
      return true;
    } catch (err) {
      if (err instanceof KvbHttpError && err.status === 404) return false;
      throw err;
    }
  }

  async updateBucket(bucket: string, changes: BucketChanges): Promise<void> {
    await this.sendForBuffer({
      method: 'PATCH',
      path: this.bucketPath(bucket),
      subject: `bucket ${bucket}`,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(changes),
    });
  }

  async deleteBucket(bucket: string): Promise<void> {
    await this.sendForBuffer({ method: 'DELETE', path: this.bucketPath(bucket), subject: `bucket ${bucket}` });
  }

  /** Sets a key. Without a contentType the server infers the type, as it does for curl. */
  async set(bucket: string, key: string, body: Buffer, options: { contentType?: string | undefined; ttl?: number | undefined } = {}): Promise<ValueRead> {
    const { response, data } = await this.sendForBuffer({
      method: 'POST',
      path: this.keyPath(bucket, key),
      subject: `key ${JSON.stringify(key)} in bucket ${bucket}`,
      query: { ttl: options.ttl },
      headers: options.contentType ? { 'content-type': options.contentType } : {},
      body,
    });
    return this.valueRead(response, data);
  }

  async get(bucket: string, key: string): Promise<ValueRead> {
    const { response, data } = await this.sendForBuffer({
      method: 'GET',
      path: this.keyPath(bucket, key),
      subject: `key ${JSON.stringify(key)} in bucket ${bucket}`,
    });
    return this.valueRead(response, data);
  }

  private valueRead(response: Dispatcher.ResponseData, data: Buffer): ValueRead {
    const type = header(response.headers, 'kvb-type');
    return {
      data,
      type: type !== undefined && isValueType(type) ? type : undefined,
      contentType: header(response.headers, 'content-type'),
      expiresAt: header(response.headers, 'kvb-expires-at'),
    };
  }

  async del(bucket: string, key: string): Promise<void> {
    await this.sendForBuffer({ method: 'DELETE', path: this.keyPath(bucket, key), subject: `key ${JSON.stringify(key)} in bucket ${bucket}` });
  }

  /** Counter PATCH with a signed delta (`+1`, `-2.5`); resolves with the new value as text. */
  async incr(bucket: string, key: string, delta: string, ttl?: number): Promise<ValueRead> {
    const { response, data } = await this.sendForBuffer({
      method: 'PATCH',
      path: this.keyPath(bucket, key),
      subject: `key ${JSON.stringify(key)} in bucket ${bucket}`,
      query: { ttl },
      headers: { 'content-type': 'text/plain' },
      body: delta,
    });
    return this.valueRead(response, data);
  }

  /** Lists keys; the body is the server's own format, streamed (never buffered here). */
  async list(bucket: string, options: ListOptions): Promise<Readable> {
    const response = await this.send({
      method: 'GET',
      path: `${this.bucketPath(bucket)}/`,
      subject: `bucket ${bucket}`,
      query: {
        prefix: options.prefix || undefined,
        limit: options.limit,
        skip: options.skip,
        reverse: options.reverse,
        values: options.values,
        format: options.format,
      },
    });
    return response.body as unknown as Readable;
  }

  /** Commits `{"txn":[…]}` given as JSON text (sent exactly as written, so numbers keep their precision). */
  async txn(bucket: string, json: string): Promise<void> {
    await this.sendForBuffer({
      method: 'POST',
      path: this.bucketPath(bucket),
      subject: `transaction in bucket ${bucket}`,
      headers: { 'content-type': 'application/json' },
      body: json,
    });
  }

  async mintToken(bucket: string, request: TokenRequest): Promise<{ access_token: string }> {
    const form = new URLSearchParams({ prefix: request.prefix, permissions: request.permissions.join(','), ttl: String(request.ttl) });
    const { data } = await this.sendForBuffer({
      method: 'POST',
      path: `${this.bucketPath(bucket)}/tokens/`,
      subject: `token for bucket ${bucket}`,
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: form.toString(),
    });
    return JSON.parse(data.toString('utf8')) as { access_token: string };
  }
}
