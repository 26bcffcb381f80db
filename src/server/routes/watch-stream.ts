import type { FastifyReply, FastifyRequest } from 'fastify';
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

/** `GET /api/v1/{bucket}/?watch=true`: the live change feed of a prefix (see watch-hub.ts). */
export async function watchStream(
  request: FastifyRequest,
  reply: FastifyReply,
  { buckets, config, watch, clock }: ServerContext,
): Promise<void> {
  const query = queryOf(request);
  const format = streamFormat(request);
  const requestedPrefix = singleParam(query, 'prefix') ?? '';
  if (requestedPrefix !== '') checkKey(requestedPrefix, 'prefix');
  const sinceText = singleParam(query, 'since') ?? (request.headers['last-event-id'] as string | undefined);
  const since =
    sinceText === undefined || sinceText === '' ? undefined : parseInteger(sinceText.trim(), 'since', 0, Number.MAX_SAFE_INTEGER);
  const withValues = booleanParam(query, 'values');
  const op: Operation = withValues ? 'list_values' : 'enumerate';

  const id = decodeBucket((request.params as { bucket: string }).bucket);
  const { bucket, principal } = await openBucket(buckets, id, request);
  authorize(bucket, principal, op);
  const prefix = effectivePrefix(principal, requestedPrefix);
  if (watch.count >= config.maxWatchers) {
    throw new KvbError('service_unavailable', `this instance serves its limit of ${config.maxWatchers} watchers`, { 'retry-after': '5' });
  }

  // A token's expiry is known here: its stream ends at `exp` exactly, not at the next re-check.
  const expiresAt = principal.kind === 'token' ? principal.expiresAt : undefined;
  const raw = reply.raw;
  let started = false;
  let ended = false;
  const pending: string[] = [];
  const timers: NodeJS.Timeout[] = [];

  const write = (text: string) => {
    if (ended) return;
    if (!started) {
      pending.push(text);
      return;
    }
    raw.write(text);
  };
  const message = (type: string, json: string[], id?: number) =>
    format === 'sse'
      ? `${id === undefined ? '' : `id: ${id}\n`}event: ${type}\n${json.map((j) => `data: ${j}\n`).join('')}\n`
      : json.map((j) => `${j}\n`).join('');
  const end = (type: 'closed' | 'reset', json: string) => {
    if (ended) return;
    write(message(type, [json]));
    ended = true;
    if (type === 'reset') watch.resets++;
    cleanup();
    if (started) raw.end();
  };

  const watcher: Watcher & { close(reason: string): void } = {
    bucket: bucket.record.id,
    prefix,
    last: 0,
    deliver(revision, changes) {
      if (ended || changes.length === 0) return;
      // A change committed after the token's exp is never sent on it, however late the timer runs.
      if (expiresAt !== undefined && clock() >= expiresAt) return watcher.close(EXPIRED);
      if (started && raw.writableLength > MAX_WATCH_BUFFER_BYTES) {
        end('reset', JSON.stringify({ type: 'reset', rev: revision, reason: 'slow consumer: the stream fell too far behind' }));
        return;
      }
      const kinds = new Set(changes.map((c) => c.kind));
      write(
        message(
          kinds.size === 1 ? changes[0]!.kind : 'changes',
          changes.map((c) => changeEvent(c, withValues)),
          revision,
        ),
      );
      watch.eventsSent += changes.length;
    },
    reset(revision, oldest) {
      end(
        'reset',
        JSON.stringify({ type: 'reset', rev: revision, oldest, reason: 'an import replaced keys the change log does not list' }),
      );
    },
    close(reason) {
      end('closed', JSON.stringify({ type: 'closed', reason }));
    },
  };
  const cleanup = () => {
    for (const t of timers) {
      clearInterval(t);
      clearTimeout(t);
    }
    watch.leave(watcher);
  };

  if (since !== undefined) {
    const bounds = await watch.bounds(watcher.bucket);
    if (bounds && since > bounds.revision) throw badRequest(`since ${since} is ahead of the bucket's revision ${bounds.revision}`);
  }
  const joined = await watch.join(watcher, since, (rev) => {
    if (since === undefined) write(message('sync', [JSON.stringify({ type: 'sync', rev })], rev));
  });
  if (!joined.joined && 'gone' in joined) throw new KvbError('not_found', 'no such bucket');

  reply.hijack();
  raw.writeHead(200, {
    ...(reply.getHeaders() as Record<string, string>),
    'content-type': format === 'sse' ? 'text/event-stream; charset=utf-8' : 'application/x-ndjson',
    'cache-control': 'no-cache',
    'x-accel-buffering': 'no',
  });
  raw.flushHeaders();
  started = true;
  if (pending.length > 0) raw.write(pending.join(''));
  pending.length = 0;
  if (!joined.joined) {
    // `since` is older than the retained log: the client re-lists and watches from the listing's revision.
    end('reset', JSON.stringify({ type: 'reset', rev: joined.reset.rev, oldest: joined.reset.oldest }));
    return;
  }
  if (ended) {
    raw.end();
    return;
  }
  watch.register(watcher);
  // Closed as it registered (the server is shutting down): no timers for a stream already ended.
  if (ended) return;
  raw.on('close', () => {
    ended = true;
    cleanup();
    watch.unregister(watcher);
  });
  // (Past a timer's longest delay, about 24.8 days, the once-a-second re-check ends it instead.)
  const untilExpiry = expiresAt === undefined ? undefined : Math.max(0, expiresAt - clock());
  if (untilExpiry !== undefined && untilExpiry < 2 ** 31 - 1) timers.push(setTimeout(() => watcher.close(EXPIRED), untilExpiry));
  timers.push(
    setInterval(() => {
      if (!ended) write(message('progress', [JSON.stringify({ type: 'progress', rev: watcher.last })], watcher.last));
    }, config.watchProgressMs),
  );
  timers.push(
    setInterval(() => {
      void (async () => {
        try {
          const current = await buckets.get(watcher.bucket);
          if (!current) return watcher.close('the bucket was deleted');
          const now = await principalFor(buckets, current, request);
          authorize(current, now, op);
          effectivePrefix(now, requestedPrefix);
        } catch (err) {
          // Expired token, rotated or cleared key or signing key, narrowed permissions. (A storage
          // error is not a verdict on the credential: the next check retries.)
          if (err instanceof KvbError) watcher.close(EXPIRED);
        }
      })();
    }, RECHECK_MS),
  );
}
