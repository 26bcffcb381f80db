import type { FastifyRequest } from 'fastify';
import { KvbError, badRequest } from '../errors.js';

export type Query = Record<string, string | string[] | undefined>;

export function queryOf(request: FastifyRequest): Query {
  return (request.query ?? {}) as Query;
}

/** One query parameter as a single string; a repeated parameter is ambiguous, so 400. */
export function singleParam(query: Query, name: string): string | undefined {
  const value = query[name];
  if (Array.isArray(value)) throw badRequest(`query parameter ${name} is given more than once`);
  return value;
}

/** A non-negative decimal integer from text (no sign, no spaces, no exponent), within [min, max]. */
export function parseInteger(text: string, name: string, min: number, max: number): number {
  if (!/^\d{1,16}$/.test(text) || Number(text) < min || Number(text) > max) throw outOfRange(name, min, max);
  return Number(text);
}

const outOfRange = (name: string, min: number, max: number) => badRequest(`${name} must be an integer from ${min} to ${max}`);

/**
 * A count in the query of a route whose schema gives it `pattern: '^[0-9]+$'` (list-schema.ts):
 * Ajv has checked its form, one string of digits, and answered that refusal in its own words, so
 * only its range is checked here (more than 16 digits is out of range, as in parseInteger).
 */
export function queryCount(query: Query, name: string, min: number, max: number): number | undefined {
  const text = query[name] as string | undefined;
  if (text === undefined) return undefined;
  const count = Number(text);
  // Written so that NaN fails too, should the schema ever let a non-number through.
  if (!(count >= min && count <= max) || text.length > 16) throw outOfRange(name, min, max);
  return count;
}

export function optionalInteger(query: Query, name: string, min: number, max: number): number | undefined {
  const text = singleParam(query, name);
  return text === undefined ? undefined : parseInteger(text, name, min, max);
}

/** `true`/`false`/`1`/`0`, and a bare `?flag` (empty value) means true. */
export function booleanParam(query: Query, name: string): boolean {
  const text = singleParam(query, name);
  if (text === undefined) return false;
  switch (text.toLowerCase()) {
    case '':
    case 'true':
    case '1':
      return true;
    case 'false':
    case '0':
      return false;
    default:
      throw badRequest(`${name} must be true or false`);
  }
}

/** Expiry instant (ms) for a TTL in seconds; 0 means none. */
export function expiryFor(ttlSeconds: number, now: number): number | null {
  return ttlSeconds === 0 ? null : now + ttlSeconds * 1000;
}

/** `scheme://authority` at the start of an absolute-form request target (RFC 9112 §3.2.2). */
const ORIGIN = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#]*/;

/**
 * The path of the raw request URL (no query), exactly as the client sent it (still percent-encoded).
 * An absolute-form target (`GET http://host/api/v1/B/k HTTP/1.1`) gives the same path as its
 * origin-form, as the router already does, so every route reads the same bucket and key.
 */
export function rawPath(request: FastifyRequest): string {
  let url = request.raw.url ?? '/';
  if (url[0] !== '/') {
    const origin = ORIGIN.exec(url);
    if (origin) url = url.slice(origin[0].length) || '/';
  }
  const end = url.search(/[?#]/);
  return end === -1 ? url : url.slice(0, end);
}

const API_PREFIX = '/api/v1/';

/** Splits `/api/v1/{bucket}/{key...}` into the decoded bucket id and the still-encoded key. */
export function splitKeyPath(request: FastifyRequest): { bucket: string; encodedKey: string } {
  const path = rawPath(request);
  const rest = path.slice(API_PREFIX.length);
  const slash = rest.indexOf('/');
  const bucketSegment = slash === -1 ? rest : rest.slice(0, slash);
  return { bucket: decodeBucket(bucketSegment), encodedKey: slash === -1 ? '' : rest.slice(slash + 1) };
}

/**
 * The bucket id of any `/api/v1/{bucket}…` route, percent-decoded exactly once from the raw path.
 * Every route takes it here: Fastify's route parameter is already decoded once, and decoding it
 * again let `/api/v1/%2561…` reach bucket `a…` on some routes while others said 404.
 */
export function bucketIdOf(request: FastifyRequest): string {
  return splitKeyPath(request).bucket;
}

export function decodeBucket(segment: string): string {
  // `/api/v1/` itself matches the bucket routes with an empty id: that path only creates buckets.
  if (segment === '') throw methodNotAllowed(['POST']);
  // Bucket ids are plain UUIDs: nothing to decode in almost every request.
  if (!segment.includes('%')) return segment;
  try {
    return decodeURIComponent(segment);
  } catch {
    throw badRequest('bucket id has malformed percent-encoding');
  }
}

/** A form field that must appear at most once. */
export function formField(body: Record<string, unknown>, name: string): string | undefined {
  const value = body[name];
  if (value === undefined) return undefined;
  if (typeof value !== 'string') throw badRequest(`form field ${name} is given more than once`);
  return value;
}

export function formBody(request: FastifyRequest, allowed: readonly string[]): Record<string, unknown> {
  const body = request.body;
  if (body === undefined || body === null) return {};
  if (typeof body !== 'object') throw badRequest('expected an application/x-www-form-urlencoded body');
  for (const name of Object.keys(body)) {
    if (!allowed.includes(name)) throw badRequest(`unknown form field ${name}`);
  }
  return body as Record<string, unknown>;
}

export const methodNotAllowed = (allow: string[]) =>
  Object.assign(new KvbError('method_not_allowed', `allowed methods: ${allow.join(', ')}`), { allow });
