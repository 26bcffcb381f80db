/**
 * What the two lanes (fast-lane.ts for reads, write-lane.ts for writes) share: the context they
 * answer from, the one-key URL they take, a value's answer headers and the access line's id.
 */
import type { OutgoingHttpHeaders } from 'node:http';
import type { FastifyBaseLogger } from 'fastify';
import type { Principal } from '../auth/access.js';
import type { Entry, Store } from '../store/store.js';
import { decodeKey } from '../values/keys.js';
import { CONTENT_TYPES } from '../values/value-type.js';
import { openBucketNow } from './access-control.js';
import type { BucketCache, CachedBucket } from './bucket-cache.js';
import type { Clock } from './clock.js';
import { etagOf } from './conditions.js';
import { requestId } from './request-id.js';
import type { RequestLogController } from './request-log-controller.js';
import type { WebhookHealth } from './webhooks/webhook-health.js';

/** What the lanes answer from: the app's own store (timed for metrics), caches, logger and tallies. */
export interface LaneContext {
  store: Store;
  buckets: BucketCache;
  clock: Clock;
  log: FastifyBaseLogger;
  logs: RequestLogController;
  /** /health's body, as its route serializes it while no webhook lags (then the route answers). */
  healthBody: string;
  webhookHealth: WebhookHealth;
  /** The key routes' body limit (--max-value-bytes): a longer body is Fastify's to refuse. */
  maxValueBytes: number;
}

/** The route pattern the key routes' access lines and metrics name. */
export const KEY_ROUTE = '/api/v1/:bucket/*';
const API_PREFIX = '/api/v1/';
const NO_QUERY = Object.freeze({});

export interface LaneTarget {
  bucket: CachedBucket;
  principal: Principal;
  key: string;
}

/**
 * The bucket, caller and key of `/api/v1/{bucket}/{key}` when the lane can know them without
 * waiting: no query, a plain bucket id, a key that decodes, a bucket and credential the cache
 * knows. Undefined otherwise (Fastify's route then reads the same URL and answers it, errors
 * included: every check here is one the route makes too, so nothing is decided twice).
 */
export function laneTarget(ctx: LaneContext, url: string, authorization: string | undefined): LaneTarget | undefined {
  // A query, a fragment or a `;` (which routers may read as a delimiter) is Fastify's to parse.
  if (!url.startsWith(API_PREFIX) || /[?#;]/.test(url)) return undefined;
  const slash = url.indexOf('/', API_PREFIX.length);
  // No key (a listing or a bucket's own route), or a bucket id that needs decoding.
  if (slash === -1 || slash === url.length - 1) return undefined;
  const bucketId = url.slice(API_PREFIX.length, slash);
  if (bucketId === '' || bucketId.includes('%')) return undefined;
  try {
    const key = decodeKey(url.slice(slash + 1));
    const opened = openBucketNow(ctx.buckets, bucketId, authorization, NO_QUERY);
    return opened && { ...opened, key };
  } catch {
    return undefined; // Fastify's route throws the same error and answers it
  }
}

/**
 * A value's answer headers, as Fastify's key routes write them (values-reply.ts), nosniff last
 * (http-server.ts); `Vary: Origin` as app.ts's onRequest hook adds it (the lanes run only with
 * `--cors-origin *`).
 */
export function entryHeaders(entry: Pick<Entry, 'type' | 'revision' | 'expiresAt' | 'data'>): OutgoingHttpHeaders {
  return {
    vary: 'Origin',
    'content-type': CONTENT_TYPES[entry.type],
    'kvb-type': entry.type,
    etag: etagOf(entry.revision),
    'kvb-revision': String(entry.revision),
    ...(entry.expiresAt !== null && { 'kvb-expires-at': new Date(entry.expiresAt).toISOString() }),
    'content-length': String(entry.data.length),
    'x-content-type-options': 'nosniff',
  };
}

/** The request id of a lane's access line; the answer never carries it (only asked-for ids are echoed). */
export function laneRequestId(ctx: LaneContext): string | undefined {
  return ctx.logs.accessLog ? requestId(undefined) : undefined;
}
