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
 * (`/health` too). One-key writes go to the write lane (write-lane.ts); everything else
 * (errors, misses, streams, HEAD) goes to Fastify unchanged: the lane decides before it has
 * changed anything, and a miss it read is handed over with the request (`takePreread`) so the
 * store is not asked twice. On a store that reads only with a promise (PostgreSQL) the lane reads
 * the same way and hands a miss over once the read is done.
 * Off when a setting adds per-request work it does not do: `--rate-limit`, `--trust-proxy`, a
 * `--cors-origin` list (only `*` is constant).
 */
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { allows } from '../auth/access.js';
import type { Entry } from '../store/store.js';
import { KEY_ROUTE, type LaneContext, entryHeaders, laneRequestId, laneTarget } from './lane-target.js';
import { type LaneCounts, WriteLane } from './write-lane.js';

export type { LaneContext } from './lane-target.js';

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

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
  readonly taken: LaneCounts = { reads: 0, writes: 0, handedOver: 0 };

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
    const writes = new WriteLane(fastify, this.taken);
    return (req, res) => {
      const ctx = this.ctx;
      if (ctx === undefined) fastify(req, res);
      else if (!(req.method === 'GET' ? this.answer(ctx, req, res, fastify) : writes.take(ctx, req, res))) fastify(req, res);
    };
  }

  /** Answers the request if it is the lane's; false (having changed nothing) when it is Fastify's. */
  private answer(ctx: LaneContext, req: IncomingMessage, res: ServerResponse, fastify: Handler): boolean {
    const url = req.url ?? '';
    const headers = req.headers;
    for (const name of SPECIAL_HEADERS) if (headers[name] !== undefined) return false;
    if (url === '/health') return ctx.webhookHealth.lag() === undefined && this.answerHealth(ctx, req, res, url);
    const start = performance.now();
    const target = laneTarget(ctx, url, headers.authorization);
    if (!target || !allows(target.principal, 'read', target.bucket.flags, target.key)) return false;
    // Read before the answer: a client that closes at once leaves a socket with no address.
    const hit: Hit = { ctx, req, res, url, start, ip: req.socket.remoteAddress };
    const bucket = target.bucket.record.id;
    if (ctx.store.getEntryNow) return this.answerRead(hit, readNow(ctx, bucket, target.key));
    // A store that reads only with a promise (PostgreSQL): a hit is answered here all the same,
    // and a miss or a failed read is handed to Fastify once it is known, as a synchronous one is.
    readLater(ctx, bucket, target.key)
      .then((read) => this.answerRead(hit, read) || fastify(req, res))
      // Nothing a request triggers may end the process: an answer that failed to be written is
      // said on the log and its connection ended.
      .catch((err: unknown) => {
        ctx.log.error({ err }, 'the fast lane could not answer a read');
        res.destroy();
      });
    return true;
  }

  /** Writes a hit's answer; false for a miss or a failed read, left (read) for Fastify's route. */
  private answerRead(hit: Hit, read: Preread): boolean {
    if ('error' in read || read.entry === undefined) {
      (hit.req as PrereadRequest)[preread] = read;
      return false;
    }
    const { ctx, res } = hit;
    const entry = read.entry;
    this.taken.reads++;
    res.writeHead(200, this.hitHeaders(entry));
    res.end(entry.data);
    const ms = performance.now() - hit.start;
    ctx.logs.answered(ctx.log, laneRequestId(ctx), 'GET', KEY_ROUTE, hit.url, 200, ms, entry.data.length, hit.ip);
    return true;
  }

  private answerHealth(ctx: LaneContext, req: IncomingMessage, res: ServerResponse, url: string): boolean {
    const start = performance.now();
    const ip = req.socket.remoteAddress;
    res.writeHead(200, this.healthHeaders);
    res.end(ctx.healthBody);
    const bytes = this.healthHeaders['content-length'];
    ctx.logs.answered(ctx.log, laneRequestId(ctx), 'GET', '/health', url, 200, performance.now() - start, bytes, ip);
    return true;
  }

  private hitHeaders(entry: Entry): OutgoingHttpHeaders {
    let headers = this.headersOf.get(entry);
    if (headers) return headers;
    headers = entryHeaders(entry);
    this.headersOf.set(entry, headers);
    return headers;
  }
}

/** What answering a hit needs to know of its request. */
interface Hit {
  ctx: LaneContext;
  req: IncomingMessage;
  res: ServerResponse;
  url: string;
  start: number;
  ip: string | undefined;
}

/** The entry, read synchronously (SQLite), or the read's error. */
function readNow(ctx: LaneContext, bucket: string, key: string): Preread {
  try {
    return { entry: ctx.store.getEntryNow!(bucket, key, ctx.clock()) };
  } catch (error) {
    return { error };
  }
}

/** The entry, read with a promise (PostgreSQL), or the read's error. */
async function readLater(ctx: LaneContext, bucket: string, key: string): Promise<Preread> {
  try {
    return { entry: await ctx.store.getEntry(bucket, key, ctx.clock()) };
  } catch (error) {
    return { error };
  }
}
