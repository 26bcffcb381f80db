/**
 * The fast lane: the commonest answers written straight from the HTTP server's handler, before
 * Fastify makes its request and reply objects, routes, runs its hooks and validates. A GET hit
 * through Fastify cost about twice the CPU of the same answer from a bare `node:http` handler,
 * and kvb's own read was under 2% of it (docs/performance.md, "The request thread, step by step").
 *
 * The lane takes a request only when its answer is certain to be the one Fastify's route would
 * give, byte for byte, with the same access line and metrics: a GET of one key with no query,
 * no conditional or `Kvb-Include` header, no `Origin` or `X-Request-Id`, on a bucket and
 * credential the bucket cache already knows, that may read the key, and a key that is live
 * (`/health` too). Everything else (errors, misses, streams, HEAD, writes) goes to Fastify
 * unchanged: the lane decides before it has changed anything, and a miss it read is handed
 * over with the request (`takePreread`) so the store is not asked twice.
 * Off when a setting adds per-request work it does not do: `--rate-limit`, `--trust-proxy`, a
 * `--cors-origin` list (only `*` is constant).
 */
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { FastifyBaseLogger } from 'fastify';
import { allows } from '../auth/access.js';
import type { Entry, Store } from '../store/store.js';
import { CONTENT_TYPES } from '../values/value-type.js';
import { decodeKey } from '../values/keys.js';
import { openBucketNow } from './access-control.js';
import type { BucketCache } from './bucket-cache.js';
import type { Clock } from './clock.js';
import { etagOf } from './conditions.js';
import { requestId } from './request-id.js';
import type { RequestLogController } from './request-log-controller.js';
import type { WebhookHealth } from './webhooks/webhook-health.js';

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

/** What the lane answers from: the app's own store (timed for metrics), caches, logger and tallies. */
export interface LaneContext {
  store: Store;
  buckets: BucketCache;
  clock: Clock;
  log: FastifyBaseLogger;
  logs: RequestLogController;
  /** /health's body, as its route serializes it while no webhook lags (then the route answers). */
  healthBody: string;
  webhookHealth: WebhookHealth;
}

const KEY_ROUTE = '/api/v1/:bucket/*';
const API_PREFIX = '/api/v1/';
const NO_QUERY = Object.freeze({});
/** Request headers whose presence changes a GET's answer or its headers: Fastify answers those. */
const SPECIAL_HEADERS = ['if-match', 'if-none-match', 'kvb-include', 'origin', 'x-request-id'] as const;

/** A read the lane made before handing the request to Fastify (a miss, or the read's error). */
const preread = Symbol('kvb.preread');
type Preread = { entry: Entry | undefined } | { error: unknown };
type PrereadRequest = IncomingMessage & { [preread]?: Preread };

/**
 * The store read the lane already made for this request, taken once (undefined: none). The key
 * route answers from it, so a miss is counted and timed once, as if the route had read it.
 */
export function takePreread(req: IncomingMessage): Preread | undefined {
  const found = (req as PrereadRequest)[preread];
  if (found !== undefined) (req as PrereadRequest)[preread] = undefined;
  return found;
}

export class FastLane {
  private ctx: LaneContext | undefined;
  /** A hit's answer headers, built once per entry object (the entry cache hands out the same one). */
  private readonly headersOf = new WeakMap<Entry, OutgoingHttpHeaders>();
  private healthHeaders: OutgoingHttpHeaders = {};

  /** Starts taking requests (until then, and if never called, everything goes to Fastify). */
  enable(ctx: LaneContext): void {
    this.ctx = ctx;
    this.healthHeaders = {
      vary: 'Origin',
      'content-type': 'application/json; charset=utf-8',
      'content-length': String(Buffer.byteLength(ctx.healthBody)),
      'x-content-type-options': 'nosniff',
    };
  }

  /** The handler to give the HTTP server (and the in-process tests' injector): the lane, then Fastify. */
  wrap(fastify: Handler): Handler {
    return (req, res) => {
      const ctx = this.ctx;
      if (ctx === undefined || req.method !== 'GET' || !this.answer(ctx, req, res)) fastify(req, res);
    };
  }

  /** Answers the request if it is the lane's; false (having changed nothing) when it is Fastify's. */
  private answer(ctx: LaneContext, req: IncomingMessage, res: ServerResponse): boolean {
    const url = req.url ?? '';
    const headers = req.headers;
    for (const name of SPECIAL_HEADERS) if (headers[name] !== undefined) return false;
    if (url === '/health') return ctx.webhookHealth.lag() === undefined && this.answerHealth(ctx, req, res, url);
    // A query, a fragment or a `;` (which routers may read as a delimiter) is Fastify's to parse.
    if (!url.startsWith(API_PREFIX) || /[?#;]/.test(url)) return false;
    const start = performance.now();
    const slash = url.indexOf('/', API_PREFIX.length);
    // No key (a listing or a bucket's own route), or a bucket id that needs decoding.
    if (slash === -1 || slash === url.length - 1) return false;
    const bucketId = url.slice(API_PREFIX.length, slash);
    if (bucketId === '' || bucketId.includes('%')) return false;
    let key: string;
    let opened: ReturnType<typeof openBucketNow>;
    try {
      key = decodeKey(url.slice(slash + 1));
      opened = openBucketNow(ctx.buckets, bucketId, headers.authorization, NO_QUERY);
    } catch {
      return false; // Fastify's route throws the same error and answers it
    }
    if (!opened || !allows(opened.principal, 'read', opened.bucket.flags, key)) return false;
    const read = this.read(ctx, opened.bucket.record.id, key);
    if (read === undefined || 'error' in read || read.entry === undefined) {
      if (read !== undefined) (req as PrereadRequest)[preread] = read;
      return false;
    }
    const entry = read.entry;
    // Read before the answer: a client that closes at once leaves a socket with no address.
    const ip = req.socket.remoteAddress;
    res.writeHead(200, this.hitHeaders(entry));
    res.end(entry.data);
    ctx.logs.answered(ctx.log, this.id(ctx), 'GET', KEY_ROUTE, url, 200, performance.now() - start, entry.data.length, ip);
    return true;
  }

  /** The entry, read synchronously (SQLite); undefined when the store reads only with a promise. */
  private read(ctx: LaneContext, bucket: string, key: string): Preread | undefined {
    if (!ctx.store.getEntryNow) return undefined;
    try {
      return { entry: ctx.store.getEntryNow(bucket, key, ctx.clock()) };
    } catch (error) {
      return { error };
    }
  }

  private answerHealth(ctx: LaneContext, req: IncomingMessage, res: ServerResponse, url: string): boolean {
    const start = performance.now();
    const ip = req.socket.remoteAddress;
    res.writeHead(200, this.healthHeaders);
    res.end(ctx.healthBody);
    const bytes = this.healthHeaders['content-length'];
    ctx.logs.answered(ctx.log, this.id(ctx), 'GET', '/health', url, 200, performance.now() - start, bytes, ip);
    return true;
  }

  /** The request id of the access line; the answer never carries it (only asked-for ids are echoed). */
  private id(ctx: LaneContext): string | undefined {
    return ctx.logs.accessLog ? requestId(undefined) : undefined;
  }

  private hitHeaders(entry: Entry): OutgoingHttpHeaders {
    let headers = this.headersOf.get(entry);
    if (headers) return headers;
    // The order Fastify's route writes them in (values-reply.ts), nosniff last (http-server.ts);
    // `Vary: Origin` as app.ts's onRequest hook adds it (the lane runs only with `--cors-origin *`).
    headers = {
      vary: 'Origin',
      'content-type': CONTENT_TYPES[entry.type],
      'kvb-type': entry.type,
      etag: etagOf(entry.revision),
      'kvb-revision': String(entry.revision),
      ...(entry.expiresAt !== null && { 'kvb-expires-at': new Date(entry.expiresAt).toISOString() }),
      'content-length': String(entry.data.length),
      'x-content-type-options': 'nosniff',
    };
    this.headersOf.set(entry, headers);
    return headers;
  }
}
