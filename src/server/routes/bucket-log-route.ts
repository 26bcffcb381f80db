import type { FastifyReply, FastifyRequest } from 'fastify';
import { allows } from '../../auth/access.js';
import { KvbError, badRequest } from '../../errors.js';
import { HISTORY_PAGE_DEFAULT, HISTORY_PAGE_MAX } from '../../limits.js';
import type { BucketLogQuery } from '../../store/history-types.js';
import { checkKey } from '../../values/keys.js';
import { openBucket } from '../access-control.js';
import type { ServerContext } from '../server-context.js';
import { booleanParam, bucketIdOf, parseInteger, queryCount, queryOf, singleParam } from '../request-input.js';
import { actorFilter, historyLine, nextPageHeaders } from './history-routes.js';

/**
 * `GET /api/v1/{bucket}/?history=true`: the bucket-wide change log, "what did this token change?".
 * Every recorded change of the bucket (or under `prefix`) in revision order, each revision's keys
 * in byte order, as JSONL lines like a key's history with the key added; narrowed by `actor`,
 * `since`/`until` (a revision, or an RFC 3339 time) and paged by `cursor`. The secret key's alone:
 * it reads who changed what across the whole bucket.
 */

/** An RFC 3339 time (or a date: its midnight UTC), as ms since the epoch; undefined when the text is no time. */
export function parseTime(text: string): number | undefined {
  if (!/^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2}))?$/i.test(text)) return undefined;
  const ms = Date.parse(text);
  return Number.isNaN(ms) ? undefined : ms;
}

/** `since`/`until` as a revision or a time: which one, and its value. */
function bound(text: string | undefined, name: string): { revision: number } | { time: number } | undefined {
  if (text === undefined) return undefined;
  if (/^\d+$/.test(text)) return { revision: parseInteger(text, name, 0, Number.MAX_SAFE_INTEGER) };
  const time = parseTime(text);
  if (time === undefined) throw badRequest(`${name} must be a revision (an integer) or an RFC 3339 time such as 2026-01-31T12:00:00Z`);
  return { time };
}

/** The page's position: `REV:KEY` with the key base64url-encoded (the last change of the previous page). */
function decodeLogCursor(text: string): { revision: number; key: string } {
  const match = /^(\d{1,15}):([A-Za-z0-9_-]{1,400})$/.exec(text);
  const key = match ? Buffer.from(match[2]!, 'base64url').toString('utf8') : '';
  if (!match || Buffer.from(key).toString('base64url') !== match[2]) throw badRequest('cursor is not valid here: malformed');
  checkKey(key, 'cursor');
  return { revision: Number(match[1]), key };
}

const encodeLogCursor = (revision: number, key: string) => `${revision}:${Buffer.from(key).toString('base64url')}`;

/** The query of one page, from the request's parameters (which query-params.ts has checked are this mode's). */
function logQuery(request: FastifyRequest): Omit<BucketLogQuery, 'actor'> {
  const query = queryOf(request);
  const format = singleParam(query, 'format');
  if (format !== undefined && format !== 'jsonl') throw badRequest('history=true answers JSONL: leave out format, or give format=jsonl');
  const prefix = singleParam(query, 'prefix') ?? '';
  if (prefix !== '') checkKey(prefix, 'prefix');
  const since = bound(singleParam(query, 'since'), 'since');
  const until = bound(singleParam(query, 'until'), 'until');
  const cursor = singleParam(query, 'cursor');
  return {
    prefix,
    after: cursor === undefined ? undefined : decodeLogCursor(cursor),
    // since=N: after revision N, as a watch's since; since=TIME: committed at or after it.
    sinceRevision: since && 'revision' in since ? since.revision + 1 : 0,
    sinceTime: since && 'time' in since ? since.time : 0,
    untilRevision: until && 'revision' in until ? until.revision : Number.MAX_SAFE_INTEGER,
    untilTime: until && 'time' in until ? until.time : Number.MAX_SAFE_INTEGER,
    limit: queryCount(query, 'limit', 1, HISTORY_PAGE_MAX) ?? HISTORY_PAGE_DEFAULT,
  };
}

export async function bucketLogRoute({ store, buckets }: ServerContext, request: FastifyRequest, reply: FastifyReply): Promise<Buffer> {
  const q = logQuery(request);
  const { bucket, principal } = await openBucket(buckets, bucketIdOf(request), request);
  if (!allows(principal, 'manage', bucket.flags)) {
    throw new KvbError(principal.kind === 'anonymous' ? 'unauthorized' : 'forbidden', "the bucket's change log needs the secret key");
  }
  const actor = actorFilter(request, bucket, principal);
  const bucketId = bucket.record.id;
  const bounds = await store.changes.bounds(bucketId);
  if (!bounds) throw new KvbError('not_found', 'no such bucket');
  const records = await store.history.bucketLog(bucketId, { ...q, actor, limit: q.limit + 1 });
  const page = records.slice(0, q.limit);
  reply.header('kvb-revision', String(bounds.revision)).header('kvb-history-floor', String(bounds.floor));
  if (records.length > q.limit) {
    const last = page[page.length - 1]!;
    nextPageHeaders(request, reply, encodeLogCursor(last.revision, last.key));
  }
  reply.header('content-type', 'application/x-ndjson');
  const withValues = booleanParam(queryOf(request), 'values');
  return Buffer.from(page.map((r) => historyLine(r, withValues, r.key)).join(''));
}
