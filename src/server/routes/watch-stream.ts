import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ServerResponse } from 'node:http';
import type { Operation } from '../../auth/access.js';
import { KvbError, badRequest } from '../../errors.js';
import type { Change } from '../../store/store.js';
import { checkKey } from '../../values/keys.js';
import { exportedValue } from '../../values/export-format.js';
import { authorize, openBucket, principalFor } from '../access-control.js';
import { booleanParam, decodeBucket, parseInteger, queryOf, singleParam } from '../request-input.js';
import type { ServerContext } from '../server-context.js';
import type { Watcher } from '../watch-hub.js';
import { effectivePrefix } from './effective-prefix.js';

/** Bytes a watcher may have waiting in its socket's buffer before it is a slow consumer (sent `reset`, closed). */
export const MAX_WATCH_BUFFER_BYTES = 1024 * 1024;
/** How often an open stream re-checks its credential (the bound for other credential changes on a shared store). */
const RECHECK_MS = 1000;
/** The reason a stream ends with when its credential lapses (an expired token included); clients match on this text, so it stays as it is. */
const EXPIRED = 'the credential is no longer valid';

function changeEvent(c: Change, withValues: boolean): string {
  const base = `{"type":"${c.kind}","key":${JSON.stringify(c.key)},"rev":${c.revision}`;
  if (c.kind !== 'set' || !c.value) return `${base}}`;
  const expires = c.expiresAt === null ? 'null' : JSON.stringify(new Date(c.expiresAt).toISOString());
  return `${base},"value_type":"${c.value.type}","expires_at":${expires}${withValues ? `,"value":${exportedValue(c.value)}` : ''}}`;
}

/** SSE when asked for by Accept; JSONL with format=jsonl, Accept: application/x-ndjson or any Accept that allows it. */
function streamFormat(request: FastifyRequest): 'sse' | 'jsonl' {
  const format = singleParam(queryOf(request), 'format');
  if (format !== undefined) {
    if (format !== 'jsonl')
      throw new KvbError('not_acceptable', 'a watch streams as format=jsonl or as Server-Sent Events (Accept: text/event-stream)');
    return 'jsonl';
  }
  const accept = (request.headers.accept ?? '*/*').toLowerCase();
  if (accept.includes('text/event-stream')) return 'sse';
  if (accept.includes('application/x-ndjson') || accept.includes('*/*') || accept.includes('application/*')) return 'jsonl';
  throw new KvbError('not_acceptable', 'a watch answers text/event-stream or application/x-ndjson');
}

/** What a watch's query asks for, checked before the bucket is opened. */
export interface WatchQuery {
  format: 'sse' | 'jsonl';
  requestedPrefix: string;
  /** The revision to resume after (`since`, or the SSE Last-Event-ID), if any. */
  since: number | undefined;
  withValues: boolean;
  op: Operation;
}

export function watchQueryOf(request: FastifyRequest): WatchQuery {
  const query = queryOf(request);
  const format = streamFormat(request);
  const requestedPrefix = singleParam(query, 'prefix') ?? '';
  if (requestedPrefix !== '') checkKey(requestedPrefix, 'prefix');
  const sinceText = singleParam(query, 'since') ?? (request.headers['last-event-id'] as string | undefined);
  const since =
    sinceText === undefined || sinceText === '' ? undefined : parseInteger(sinceText.trim(), 'since', 0, Number.MAX_SAFE_INTEGER);
  const withValues = booleanParam(query, 'values');
  return { format, requestedPrefix, since, withValues, op: withValues ? 'list_values' : 'enumerate' };
}

/** `GET /api/v1/{bucket}/?watch=true`: the live change feed of a prefix (see watch-hub.ts). */
export async function watchStream(request: FastifyRequest, reply: FastifyReply, ctx: ServerContext): Promise<void> {
  const { buckets, config, watch } = ctx;
  const asked = watchQueryOf(request);
  const id = decodeBucket((request.params as { bucket: string }).bucket);
  const { bucket, principal } = await openBucket(buckets, id, request);
  authorize(bucket, principal, asked.op);
  const prefix = effectivePrefix(principal, asked.requestedPrefix);
  if (watch.count >= config.maxWatchers) {
    throw new KvbError('service_unavailable', `this instance serves its limit of ${config.maxWatchers} watchers`, { 'retry-after': '5' });
  }
  // A token's expiry is known here: its stream ends at `exp` exactly, not at the next re-check.
  const expiresAt = principal.kind === 'token' ? principal.expiresAt : undefined;
  const stream = new WatchConnection(ctx, reply.raw, bucket.record.id, prefix, asked, expiresAt);
  const { since } = asked;
  if (since !== undefined) {
    const bounds = await watch.bounds(stream.bucket);
    if (bounds && since > bounds.revision) throw badRequest(`since ${since} is ahead of the bucket's revision ${bounds.revision}`);
  }
  const joined = await watch.join(stream, since, (rev) => {
    if (since === undefined) stream.write(stream.message('sync', [JSON.stringify({ type: 'sync', rev })], rev));
  });
  if (!joined.joined && 'gone' in joined) throw new KvbError('not_found', 'no such bucket');
  stream.start(reply);
  if (!joined.joined) {
    // `since` is older than the retained log: the client re-lists and watches from the listing's revision.
    stream.end('reset', JSON.stringify({ type: 'reset', rev: joined.reset.rev, oldest: joined.reset.oldest }));
    return;
  }
  if (stream.ended) {
    reply.raw.end();
    return;
  }
  watch.register(stream);
  // Closed as it registered (the server is shutting down): no timers for a stream already ended.
  if (stream.ended) return;
  stream.keepAlive(request, asked.requestedPrefix);
}

/**
 * One watch stream: a watcher of the hub that writes what it is given to the response, held back
 * until the answer's head is written, and ended once (closed, reset, or by the client).
 */
class WatchConnection implements Watcher {
  last = 0;
  ended = false;
  private started = false;
  private readonly pending: string[] = [];
  private readonly timers: NodeJS.Timeout[] = [];

  constructor(
    private readonly ctx: ServerContext,
    private readonly raw: ServerResponse,
    readonly bucket: string,
    readonly prefix: string,
    private readonly asked: WatchQuery,
    private readonly expiresAt: number | undefined,
  ) {}

  write(text: string): void {
    if (this.ended) return;
    if (!this.started) {
      this.pending.push(text);
      return;
    }
    this.raw.write(text);
  }

  message(type: string, json: string[], id?: number): string {
    return this.asked.format === 'sse'
      ? `${id === undefined ? '' : `id: ${id}\n`}event: ${type}\n${json.map((j) => `data: ${j}\n`).join('')}\n`
      : json.map((j) => `${j}\n`).join('');
  }

  end(type: 'closed' | 'reset', json: string): void {
    if (this.ended) return;
    this.write(this.message(type, [json]));
    this.ended = true;
    if (type === 'reset') this.ctx.watch.resets++;
    this.cleanup();
    if (this.started) this.raw.end();
  }

  deliver(revision: number, changes: Change[]): void {
    if (this.ended || changes.length === 0) return;
    // A change committed after the token's exp is never sent on it, however late the timer runs.
    if (this.expiresAt !== undefined && this.ctx.clock() >= this.expiresAt) {
      this.close(EXPIRED);
      return;
    }
    if (this.started && this.raw.writableLength > MAX_WATCH_BUFFER_BYTES) {
      this.end('reset', JSON.stringify({ type: 'reset', rev: revision, reason: 'slow consumer: the stream fell too far behind' }));
      return;
    }
    const kinds = new Set(changes.map((c) => c.kind));
    const type = kinds.size === 1 ? changes[0]!.kind : 'changes';
    this.write(
      this.message(
        type,
        changes.map((c) => changeEvent(c, this.asked.withValues)),
        revision,
      ),
    );
    this.ctx.watch.eventsSent += changes.length;
  }

  reset(revision: number, oldest: number): void {
    this.end(
      'reset',
      JSON.stringify({ type: 'reset', rev: revision, oldest, reason: 'an import replaced keys the change log does not list' }),
    );
  }

  close(reason: string): void {
    this.end('closed', JSON.stringify({ type: 'closed', reason }));
  }

  /** Writes the answer's head and what waited for it. */
  start(reply: FastifyReply): void {
    const { raw } = this;
    reply.hijack();
    raw.writeHead(200, {
      ...(reply.getHeaders() as Record<string, string>),
      'content-type': this.asked.format === 'sse' ? 'text/event-stream; charset=utf-8' : 'application/x-ndjson',
      'cache-control': 'no-cache',
      'x-accel-buffering': 'no',
    });
    raw.flushHeaders();
    this.started = true;
    if (this.pending.length > 0) raw.write(this.pending.join(''));
    this.pending.length = 0;
  }

  /** Once registered: ends with the client, at the token's expiry, or when the credential lapses; sends progress meanwhile. */
  keepAlive(request: FastifyRequest, requestedPrefix: string): void {
    const { ctx, timers } = this;
    this.raw.on('close', () => {
      this.ended = true;
      this.cleanup();
      ctx.watch.unregister(this);
    });
    // (Past a timer's longest delay, about 24.8 days, the once-a-second re-check ends it instead.)
    const untilExpiry = this.expiresAt === undefined ? undefined : Math.max(0, this.expiresAt - ctx.clock());
    if (untilExpiry !== undefined && untilExpiry < 2 ** 31 - 1) timers.push(setTimeout(() => this.close(EXPIRED), untilExpiry));
    timers.push(
      setInterval(() => {
        if (!this.ended) this.write(this.message('progress', [JSON.stringify({ type: 'progress', rev: this.last })], this.last));
      }, ctx.config.watchProgressMs),
    );
    timers.push(setInterval(() => void this.recheck(request, requestedPrefix), RECHECK_MS));
  }

  /** Ends the stream when its bucket is gone or its credential no longer allows it. */
  private async recheck(request: FastifyRequest, requestedPrefix: string): Promise<void> {
    const { buckets } = this.ctx;
    try {
      const current = await buckets.get(this.bucket);
      if (!current) return this.close('the bucket was deleted');
      const now = await principalFor(buckets, current, request);
      authorize(current, now, this.asked.op);
      effectivePrefix(now, requestedPrefix);
    } catch (err) {
      // Expired token, rotated or cleared key or signing key, narrowed permissions. (A storage
      // error is not a verdict on the credential: the next check retries.)
      if (err instanceof KvbError) this.close(EXPIRED);
    }
  }

  private cleanup(): void {
    for (const t of this.timers) {
      clearInterval(t);
      clearTimeout(t);
    }
    this.ctx.watch.leave(this);
  }
}
