/**
 * The write lane: a one-key set (PUT or POST), counter (PATCH) or delete answered from the HTTP
 * server's handler, before Fastify, as the fast lane (fast-lane.ts) answers a GET hit. Through
 * Fastify, routing, hooks, body parsing, schema checks and the reply were about half of a SET's
 * request-thread CPU (docs/performance.md, "The request thread, step by step").
 *
 * It takes a write only when it can vouch for every check Fastify's route would make: no query,
 * no `Origin` or `X-Request-Id`, a body announced by Content-Length within the value limit (no
 * chunked body) with a Content-Type Fastify's parser takes as it is, a bucket and credential the
 * bucket cache knows that may make the write (and read the key, under If-Match/If-None-Match).
 * Anything else goes to Fastify untouched, before the lane has read or changed anything.
 * Once it has read the body, every refusal is Fastify's to answer, by the same route: a body its
 * type refuses (invalid JSON, text that is not UTF-8, a delta that is not one), a store refusal
 * (a failed condition, a quota, a storage error) or a delete of an absent key is handed to
 * Fastify with the body replayed (`replayBody`) and the store's answer to the write already made
 * (`takeWritten`), so the route answers it with its own envelope, headers, access line and
 * metrics, and nothing is written twice. A success is answered here, byte for byte as the route
 * would (test/http/fast-lane.test.ts compares them).
 */
import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { allows } from '../auth/access.js';
import type { CounterOp, DeleteOp, ResultOf, SetOp, WriteOp } from '../store/core/write-ops.js';
import { type Condition, isRefusal } from '../store/store.js';
import { actorFor } from './access-control.js';
import { parsedAddress } from './client-address.js';
import { writeCondition } from './conditions.js';
import { KEY_ROUTE, type LaneContext, type LaneTarget, entryHeaders, laneRequestId, laneTarget } from './lane-target.js';
import { type KeyWrite, counterDelta, counterOp, deleteOp, setOp } from './routes/key-writes.js';

type Handler = (req: IncomingMessage, res: ServerResponse) => void;
type Kind = 'set' | 'counter' | 'delete';

const KINDS: Record<string, Kind | undefined> = { PUT: 'set', POST: 'set', PATCH: 'counter', DELETE: 'delete' };
const PERMISSION = { set: 'write', counter: 'write', delete: 'delete' } as const;
/** Content-Types Fastify's parser takes as they are (another may be a 415, or parse differently). */
const PLAIN_TYPE = /^(?:text\/plain|application\/json|application\/octet-stream)(?:; ?charset=utf-8)?$/;
const DIGITS = /^\d{1,9}$/;

/** A write the lane made and handed to Fastify: the store's answer, and the bucket and caller it was made for. */
export interface HandedWrite<O extends WriteOp> {
  result: Promise<ResultOf<O>>;
  target: LaneTarget;
}

/** What a write handed to Fastify carries: the body the lane read (or its read's error), the write it made. */
const replay = Symbol('kvb.replay');
const written = Symbol('kvb.written');
type LaneRequest = IncomingMessage & { [replay]?: { body: Buffer; error?: unknown }; [written]?: HandedWrite<WriteOp> };

/**
 * The write the lane already made for this request (its answer a refusal or an error), taken
 * once; undefined when the lane made none. The key route answers from it instead of writing, and
 * with its target: resolving the bucket and caller again could fail where the lane's did not (a
 * shared store's bucket cache reloads every second), and must not replace the write's own answer.
 */
export function takeWritten<O extends WriteOp>(req: IncomingMessage): HandedWrite<O> | undefined {
  const found = (req as LaneRequest)[written];
  if (found !== undefined) (req as LaneRequest)[written] = undefined;
  return found as HandedWrite<O> | undefined;
}

/**
 * The key write routes' preParsing hook: a body the lane read is replayed to Fastify's parser as
 * the socket gave it (or failing as the socket's read failed), so its limits and errors apply.
 */
export function replayBody(
  request: FastifyRequest,
  _reply: FastifyReply,
  payload: Readable,
  done: (err: Error | null, stream?: Readable) => void,
): void {
  const read = (request.raw as LaneRequest)[replay];
  if (read === undefined) {
    done(null, payload);
    return;
  }
  (request.raw as LaneRequest)[replay] = undefined;
  // Lazy: nothing (an error above all) is emitted before the parser listens. Once: a body of the
  // stream's high-water mark (16 KiB) or more makes push() answer false, which asks for no more
  // pushes, not for the body again (pushing it again on every read() replayed it for ever).
  let replayed = false;
  const stream = new Readable({
    read() {
      if (replayed) return;
      replayed = true;
      if (read.error !== undefined) this.destroy(read.error as Error);
      else {
        this.push(read.body);
        this.push(null);
      }
    },
  });
  done(null, stream);
}

/** Whether the lane may read this write's body: Fastify's parser would take it as it is, within its limit. */
function lanesBody(headers: IncomingHttpHeaders, kind: Kind, limit: number): boolean {
  if (headers['transfer-encoding'] !== undefined) return false;
  const length = headers['content-length'];
  const type = headers['content-type'];
  // A delete's body is never read: the lane takes one that has none (Fastify parses none either).
  if (kind === 'delete') return type === undefined && (length === undefined || length === '0');
  if (type !== undefined && !PLAIN_TYPE.test(type)) return false;
  return length === undefined || (DIGITS.test(length) && Number(length) <= limit);
}

/** The write's precondition; false when it is Fastify's (malformed, or the caller may not read the key). */
function conditionOf(headers: IncomingHttpHeaders, target: LaneTarget): Condition | undefined | false {
  if (headers['if-match'] === undefined && headers['if-none-match'] === undefined) return undefined;
  try {
    const condition = writeCondition(headers);
    return allows(target.principal, 'read', target.bucket.flags, target.key) && condition;
  } catch {
    return false;
  }
}

/** What one write under way knows: its request, where it came from, and when it started. */
interface Taken {
  ctx: LaneContext;
  req: IncomingMessage;
  res: ServerResponse;
  kind: Kind;
  target: LaneTarget;
  write: KeyWrite;
  ip: string | undefined;
  start: number;
}

/** How many requests a lane took: answered itself, and (writes) read and then handed to Fastify. Tests read them. */
export interface LaneCounts {
  reads: number;
  writes: number;
  handedOver: number;
}

export class WriteLane {
  constructor(
    private readonly fastify: Handler,
    private readonly counts: LaneCounts,
  ) {}

  /** Takes the write if it is the lane's (true); false, having read and changed nothing, when it is Fastify's. */
  take(ctx: LaneContext, req: IncomingMessage, res: ServerResponse): boolean {
    const kind = KINDS[req.method ?? ''];
    if (kind === undefined) return false;
    const headers = req.headers;
    if (headers.origin !== undefined || headers['x-request-id'] !== undefined) return false;
    if (!lanesBody(headers, kind, ctx.maxValueBytes)) return false;
    const start = performance.now();
    const target = laneTarget(ctx, req.url ?? '', headers.authorization);
    if (!target || !allows(target.principal, PERMISSION[kind], target.bucket.flags, target.key)) return false;
    const condition = conditionOf(headers, target);
    if (condition === false) return false;
    // Read while the socket is there (as Fastify's first hook does): it is the actor's and the log's.
    const ip = parsedAddress(req.socket.remoteAddress);
    const write: KeyWrite = { key: target.key, bucket: target.bucket, ttl: undefined, condition, actor: actorFor(target.principal, ip) };
    const taken: Taken = { ctx, req, res, kind, target, write, ip, start };
    this.counts.writes++;
    if (kind === 'delete') this.commit(taken, deleteOp(write, ctx.clock()), undefined);
    else readBody(req, (body, error) => (error === undefined ? this.parsed(taken, body) : this.handOver(taken, { body, error })));
    return true;
  }

  /** The set or counter its body asks for; a body its type refuses is Fastify's to answer. */
  private parsed(taken: Taken, body: Buffer): void {
    let op: WriteOp;
    try {
      const now = taken.ctx.clock();
      if (taken.kind === 'set') op = setOp(taken.write, body, taken.req.headers['content-type'], now);
      else op = counterOp(taken.write, counterDelta(body.toString('utf8')), now);
    } catch {
      this.handOver(taken, { body });
      return;
    }
    this.commit(taken, op, body);
  }

  private commit(taken: Taken, op: WriteOp, body: Buffer | undefined): void {
    let result: Promise<unknown>;
    try {
      result = taken.ctx.store.write(taken.target.bucket.record.id, op);
    } catch (error) {
      result = Promise.reject(error);
    }
    const handOver = () => this.handOver(taken, body && { body }, result);
    result
      .then((outcome) => (this.answer(taken, op, outcome) ? undefined : handOver()), handOver)
      // Nothing a request triggers may end the process: an answer that failed to be written (it
      // has no known cause) is said on the log and its connection ended, not left unhandled.
      .catch((err: unknown) => {
        taken.ctx.log.error({ err }, 'the write lane could not answer a write');
        taken.res.destroy();
      });
  }

  /** Writes the success answer the route would; false (nothing sent) for a refusal or a delete of nothing. */
  private answer(taken: Taken, op: WriteOp, outcome: unknown): boolean {
    const answer = successOf(op, outcome);
    if (answer === undefined) return false;
    const { ctx, req, res, start, ip } = taken;
    res.writeHead(answer.status, answer.headers);
    res.end(answer.data);
    // A client gone before its answer got none: Fastify's log controller, which runs on the
    // answer's 'finish', logs and counts nothing then either.
    if (res.destroyed) return true;
    const bytes = answer.headers['content-length'];
    ctx.logs.answered(
      ctx.log,
      laneRequestId(ctx),
      req.method ?? '',
      KEY_ROUTE,
      req.url ?? '',
      answer.status,
      performance.now() - start,
      bytes,
      ip,
    );
    return true;
  }

  private handOver(taken: Taken, read: { body: Buffer; error?: unknown } | undefined, result?: Promise<unknown>): void {
    const req = taken.req as LaneRequest;
    this.counts.handedOver++;
    if (read !== undefined) req[replay] = read;
    if (result !== undefined) req[written] = { result: result as Promise<ResultOf<WriteOp>>, target: taken.target };
    this.fastify(taken.req, taken.res);
  }
}

/** The key route's success answer to a write's outcome; undefined for a refusal or a delete of nothing. */
function successOf(op: WriteOp, outcome: unknown): { status: number; headers: OutgoingHttpHeaders; data?: Buffer } | undefined {
  switch (op.op) {
    case 'set': {
      const done = outcome as ResultOf<SetOp>;
      if (isRefusal(done)) return undefined;
      return { status: 200, headers: entryHeaders({ ...op.value, expiresAt: op.expiresAt, revision: done.revision }), data: op.value.data };
    }
    case 'counter': {
      const entry = outcome as ResultOf<CounterOp>;
      return isRefusal(entry) ? undefined : { status: 200, headers: entryHeaders(entry), data: entry.data };
    }
    case 'delete': {
      const done = outcome as ResultOf<DeleteOp>;
      if (isRefusal(done) || !done.deleted) return undefined;
      return { status: 204, headers: { vary: 'Origin', 'kvb-revision': String(done.revision), 'x-content-type-options': 'nosniff' } };
    }
    default:
      return undefined;
  }
}

/** The request's whole body (copied out of the socket's buffers, as Fastify's parser does), or its read's error. */
function readBody(req: IncomingMessage, done: (body: Buffer, error?: unknown) => void): void {
  const chunks: Buffer[] = [];
  let length = 0;
  const onData = (chunk: Buffer) => {
    chunks.push(chunk);
    length += chunk.length;
  };
  const finish = (error?: unknown) => {
    req.removeListener('data', onData).removeListener('end', finish).removeListener('error', finish);
    done(Buffer.concat(chunks, length), error ?? undefined);
  };
  req.on('data', onData).once('end', finish).once('error', finish);
}
