import { isValueType, type ValueType } from '../values/value-type.js';
import { revisionOf } from './client-errors.js';
import type { CallOptions, ValueRead, WriteCondition } from './http-types.js';
import { type Answer, type HttpTransport, callOf, keyPath } from './http-transport.js';

// The key routes: PUT, GET, DELETE and the counter PATCH of /api/v1/BUCKET/KEY.

const encoder = new TextEncoder();

/** The RFC 9110 conditional headers for a write condition. */
export function conditionHeaders(condition: WriteCondition = {}): Record<string, string> {
  if (condition.ifRevision !== undefined) return { 'if-match': `"${condition.ifRevision}"` };
  if (condition.ifAbsent) return { 'if-none-match': '*' };
  if (condition.ifExists) return { 'if-match': '*' };
  return {};
}

/**
 * A key as an error message names it: quoted, and cut after its first 60 characters when longer
 * than 80 (a key past the 128-byte limit would otherwise be echoed whole, 2,000 characters of it).
 */
export function quotedKey(key: string): string {
  const characters = Array.from(key);
  if (characters.length <= 80) return JSON.stringify(key);
  return `${JSON.stringify(characters.slice(0, 60).join('')).slice(0, -1)}…" (${encoder.encode(key).length} bytes)`;
}

/** The requests on one key. */
export class KeyRequests {
  readonly #http: HttpTransport;

  constructor(http: HttpTransport) {
    this.#http = http;
  }

  /**
   * Sets a key with PUT (idempotent), or POST, the spec's primary method for the same write (the
   * console's). Without a contentType the server infers the type, as it does for curl.
   */
  async set(
    bucket: string,
    key: string,
    body: string | Uint8Array,
    options: CallOptions & {
      contentType?: string | undefined;
      ttl?: number | undefined;
      condition?: WriteCondition | undefined;
      method?: 'PUT' | 'POST' | undefined;
    } = {},
  ): Promise<ValueRead> {
    const answer = await this.#http.send({
      ...callOf(options),
      method: options.method ?? 'PUT',
      path: keyPath(bucket, key),
      subject: `key ${quotedKey(key)} in bucket ${bucket}`,
      query: { ttl: options.ttl },
      headers: { ...(options.contentType && { 'content-type': options.contentType }), ...conditionHeaders(options.condition) },
      // Bytes, never a string: fetch would add `Content-Type: text/plain`, which is evidence of text.
      body: typeof body === 'string' ? encoder.encode(body) : body,
      idempotent: true,
    });
    return valueRead(answer);
  }

  /**
   * The key's value; with `revision`, as it was at that revision (history). With
   * `createRevision`, also its create revision (a fencing token; not for history reads).
   */
  async get(
    bucket: string,
    key: string,
    options: CallOptions & { revision?: number | undefined; createRevision?: boolean | undefined } = {},
  ): Promise<ValueRead> {
    return valueRead(
      await this.#http.send({
        ...callOf(options),
        method: 'GET',
        path: keyPath(bucket, key),
        subject: `key ${quotedKey(key)} in bucket ${bucket}`,
        query: { rev: options.revision },
        ...(options.createRevision && { headers: { 'kvb-include': 'create-revision' } }),
        idempotent: true,
      }),
    );
  }

  /** Deletes a key; resolves with the revision of the commit. */
  async del(bucket: string, key: string, condition?: WriteCondition, options: CallOptions = {}): Promise<number | undefined> {
    const answer = await this.#http.send({
      ...callOf(options),
      method: 'DELETE',
      path: keyPath(bucket, key),
      subject: `key ${quotedKey(key)} in bucket ${bucket}`,
      headers: conditionHeaders(condition),
      idempotent: true,
    });
    return revisionOf(answer.headers.get('kvb-revision'));
  }

  /** Counter PATCH with a signed delta (`+1`, `-2.5`); resolves with the new value as text. Never retried. */
  async incr(
    bucket: string,
    key: string,
    delta: string,
    ttl?: number,
    condition?: WriteCondition,
    options: CallOptions = {},
  ): Promise<ValueRead> {
    const answer = await this.#http.send({
      ...callOf(options),
      method: 'PATCH',
      path: keyPath(bucket, key),
      subject: `key ${quotedKey(key)} in bucket ${bucket}`,
      query: { ttl },
      headers: { 'content-type': 'text/plain', ...conditionHeaders(condition) },
      body: encoder.encode(delta),
    });
    return valueRead(answer);
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
    createRevision: revisionOf(headers.get('kvb-create-revision')),
  };
}

const typeOf = (text: string | null): ValueType | undefined => (text !== null && isValueType(text) ? text : undefined);
