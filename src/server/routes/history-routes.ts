import type { FastifyReply, FastifyRequest } from 'fastify';
import { type Principal, allows, rollbackOperations } from '../../auth/access.js';
import { KvbError, badRequest } from '../../errors.js';
import { ACTOR_KINDS, type Actor, type ActorFilter, type ActorKind, type HistoryRecord, type PastRead } from '../../store/history-types.js';
import { isTokenId } from '../../auth/tokens.js';
import { MAX_ROLLBACK_CHANGES, planRollback, rollback } from '../../store/rollback.js';
import type { Entry, EntrySnapshot, ChangeLogBounds, Store } from '../../store/store.js';
import { checkKey } from '../../values/keys.js';
import { valueAsJson } from '../../values/list-format.js';
import { actorOf, authorize, openBucket } from '../access-control.js';
import type { CachedBucket } from '../bucket-cache.js';
import type { Clock } from '../clock.js';
import type { ServerContext } from '../server-context.js';
import { booleanParam, bucketIdOf, optionalInteger, queryOf, singleParam } from '../request-input.js';
import { HISTORY_PAGE_DEFAULT, HISTORY_PAGE_MAX } from '../../limits.js';

/**
 * History: reads of a key or listing as of a past revision (`rev=N`), a key's changes
 * (`history=true`), and rollback (`POST /api/v1/{bucket}?rollback=N`). Every parameter here is
 * an extension: a request without them is answered exactly as before.
 */

/** `rev=N` of a request, when given (a non-negative integer, else 400). */
export function revisionParam(request: FastifyRequest): number | undefined {
  return optionalInteger(queryOf(request), 'rev', 0, Number.MAX_SAFE_INTEGER);
}

/** Whether a key GET or HEAD asks for the past (`rev` or `history`): checked on every read, so it only looks. */
export function asksForPast(request: FastifyRequest): boolean {
  const query = request.query as Record<string, unknown> | undefined;
  return query !== undefined && (query.rev !== undefined || query.history !== undefined);
}

const floorHeader = (reply: FastifyReply | undefined, bounds: ChangeLogBounds) => reply?.header('kvb-history-floor', String(bounds.floor));

/** The value of a read of the past, or the error that says why there is none. */
export function pastValue<T>(read: PastRead<T>, revision: number, reply?: FastifyReply): T {
  if (read.outcome === 'ok') {
    floorHeader(reply, read.bounds);
    return read.value;
  }
  if (read.outcome === 'no_bucket') throw new KvbError('not_found', 'no such bucket');
  floorHeader(reply, read.bounds);
  if (read.outcome === 'future') throw badRequest(`revision ${revision} is newer than the bucket's revision ${read.bounds.revision}`);
  throw new KvbError(
    'gone',
    `revision ${revision} is older than this bucket's history, which starts at revision ${read.bounds.floor} (see --history-retention)`,
    { 'kvb-history-floor': String(read.bounds.floor) },
  );
}

/**
 * GET/HEAD `/api/v1/{bucket}/{key}?rev=N` (the key as it was: `answer` replies as a present read
 * does) or `?history=true` (its changes as JSONL, newest first, paged by `cursor`).
 */
export async function readPast(
  store: Store,
  clock: Clock,
  request: FastifyRequest,
  reply: FastifyReply,
  bucket: CachedBucket,
  principal: Principal,
  key: string,
  answer: (entry: Entry | undefined) => Buffer | undefined,
): Promise<Buffer | undefined> {
  const query = queryOf(request);
  const bucketId = bucket.record.id;
  if (booleanParam(query, 'history')) return historyPage(store, request, reply, bucketId, key, actorFilter(request, bucket, principal));
  const revision = revisionParam(request);
  // `history=false` without `rev`: the present, as if neither were given.
  if (revision === undefined) return answer(await store.getEntry(bucketId, key, clock()));
  const entry = pastValue(await store.history.readAt(bucketId, key, revision), revision, reply);
  return answer(entry);
}

/**
 * `actor=KIND` or `actor=token:ID` of a history read: only that actor's changes. The secret key's
 * alone: it searches who did what across the key's history, an audit (403 for other credentials).
 */
export function actorFilter(request: FastifyRequest, bucket: CachedBucket, principal: Principal): ActorFilter | undefined {
  const text = singleParam(queryOf(request), 'actor');
  if (text === undefined) return undefined;
  const [kind, ...rest] = text.split(':');
  const tokenId = rest.length > 0 ? rest.join(':') : undefined;
  if (!(ACTOR_KINDS as readonly string[]).includes(kind!) || (tokenId !== undefined && (kind !== 'token' || !isTokenId(tokenId)))) {
    throw badRequest(`actor must be one of ${ACTOR_KINDS.join(', ')}, or token:ID (a token id as minting answered it)`);
  }
  if (!allows(principal, 'manage', bucket.flags)) {
    throw new KvbError(principal.kind === 'anonymous' ? 'unauthorized' : 'forbidden', 'filtering history by actor needs the secret key');
  }
  return { kind: kind as ActorKind, ...(tokenId !== undefined && { tokenId }) };
}

/** A history line's `actor`: kind, token id and address (null where none); null for changes recorded before kvb kept actors. */
function actorJson(actor: Actor | null): string {
  if (!actor) return 'null';
  return JSON.stringify({ kind: actor.kind, token_id: actor.tokenId ?? null, address: actor.address ?? null });
}

/** One history line: revision (and the key, in the bucket-wide log), operation, time, type, size and expiry, who made it, and the value when asked for. */
export function historyLine(record: HistoryRecord, withValue: boolean, key?: string): string {
  const value = record.value;
  const expires =
    record.expiresAt === undefined || record.expiresAt === null ? 'null' : JSON.stringify(new Date(record.expiresAt).toISOString());
  let line =
    `{"rev":${record.revision}${key === undefined ? '' : `,"key":${JSON.stringify(key)}`},"operation":"${record.operation}","time":${JSON.stringify(new Date(record.time).toISOString())}` +
    `,"type":${value ? `"${value.type}"` : 'null'},"size":${value ? value.data.length : 'null'},"expires_at":${expires},"actor":${actorJson(record.actor)}`;
  if (withValue) line += `,"value":${value ? valueAsJson(value) : 'null'}`;
  return `${line}}\n`;
}

/** A history page's Kvb-Next-Cursor and its Link: the same request (no credential in it) continued at `next`. */
export function nextPageHeaders(request: FastifyRequest, reply: FastifyReply, next: string): void {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(queryOf(request))) {
    if (!['cursor', 'access_token', 'key'].includes(name) && typeof value === 'string') params.set(name, value);
  }
  params.set('cursor', next);
  reply.header('kvb-next-cursor', next).header('link', `<${request.url.split('?')[0]}?${params.toString()}>; rel="next"`);
}

async function historyPage(
  store: Store,
  request: FastifyRequest,
  reply: FastifyReply,
  bucketId: string,
  key: string,
  actor: ActorFilter | undefined,
): Promise<Buffer> {
  const query = queryOf(request);
  const limit = optionalInteger(query, 'limit', 1, HISTORY_PAGE_MAX) ?? HISTORY_PAGE_DEFAULT;
  const cursor = singleParam(query, 'cursor');
  // The cursor is the revision the page continues below: nothing secret, the key's own history.
  if (cursor !== undefined && !/^[0-9]{1,15}$/.test(cursor)) throw badRequest('cursor is not valid here: malformed');
  const before = cursor === undefined ? Number.MAX_SAFE_INTEGER : Number(cursor);
  const bounds = await store.changes.bounds(bucketId);
  if (!bounds) throw new KvbError('not_found', 'no such bucket');
  const records = await store.history.keyHistory(bucketId, key, before, limit + 1, actor);
  const withValues = booleanParam(query, 'values');
  const page = records.slice(0, limit);
  reply.header('kvb-revision', String(bounds.revision)).header('kvb-history-floor', String(bounds.floor));
  if (records.length > limit) nextPageHeaders(request, reply, String(page[page.length - 1]!.revision));
  reply.header('content-type', 'application/x-ndjson');
  return Buffer.from(page.map((r) => historyLine(r, withValues)).join(''));
}

/** An export of the bucket as it was at `revision`: read from history page by page (immutable, so consistent). */
export async function pastSnapshot(store: Store, bucketId: string, prefix: string, revision: number): Promise<EntrySnapshot> {
  // Checked up front so the error is a clean response, not a broken stream.
  const first = pastValue(
    await store.history.listAt(bucketId, { prefix, reverse: false, columns: 'values', offset: 0, limit: 1 }, revision),
    revision,
  );
  let after: string | undefined;
  let done = first.length === 0;
  return {
    revision,
    async read(max) {
      if (done) return [];
      const page = pastValue(
        await store.history.listAt(
          bucketId,
          { prefix, reverse: false, columns: 'values', offset: 0, limit: max, ...(after !== undefined && { after }) },
          revision,
        ),
        revision,
      );
      if (page.length < max) done = true;
      if (page.length > 0) after = page[page.length - 1]!.key;
      return page.map(({ key, entry }) => ({ key, entry: entry! }));
    },
    async close() {},
  };
}

/** The prefix a rollback may cover: a token only its own prefix or a narrower one. */
function rollbackPrefix(principal: Principal, requested: string): string {
  if (principal.kind === 'token' && !requested.startsWith(principal.prefix)) {
    throw new KvbError('forbidden', "a token can roll back only its own prefix (give prefix= inside the token's prefix)");
  }
  return requested;
}

/** Whether a POST to the bucket is a rollback: `rollback` given and no body (a body makes it a transaction, as the spec says). */
export function isRollbackRequest(request: FastifyRequest): boolean {
  const query = request.query as Record<string, unknown> | undefined;
  if (query?.rollback === undefined) return false;
  const length = request.headers['content-length'];
  return (length === undefined || length === '0') && request.headers['transfer-encoding'] === undefined;
}

/**
 * `POST /api/v1/{bucket}?rollback=N[&prefix=P][&dry_run=true]`: makes the bucket (or the prefix)
 * equal to its state at revision N as one new revision. Needs read, write and delete on the whole
 * range (rollbackOperations; a token's prefix must hold P). Answers JSON: the
 * revision made (or, dry run, that would be rolled back from), and each key changed.
 */
export async function rollbackRoute(
  { store, buckets, clock }: ServerContext,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<FastifyReply> {
  const query = queryOf(request);
  const target = optionalInteger(query, 'rollback', 0, Number.MAX_SAFE_INTEGER)!;
  const requestedPrefix = singleParam(query, 'prefix') ?? '';
  if (requestedPrefix !== '') checkKey(requestedPrefix, 'prefix');
  const dryRun = booleanParam(query, 'dry_run');
  const { bucket, principal } = await openBucket(buckets, bucketIdOf(request), request);
  const prefix = rollbackPrefix(principal, requestedPrefix);
  // What its answer reveals and what it does (access.ts); a token's reach is checked on the prefix
  // itself (inside its own, see rollbackPrefix).
  for (const op of rollbackOperations(dryRun)) authorize(bucket, principal, op, principal.kind === 'token' ? prefix : undefined);
  const now = clock();
  const bucketId = bucket.record.id;
  const outcome = dryRun
    ? await planRollback(store, bucketId, target, prefix, now)
    : await rollback(store, bucketId, target, prefix, now, actorOf(principal, request));
  if (outcome.outcome === 'too_large') {
    throw badRequest(`a rollback changes at most ${MAX_ROLLBACK_CHANGES} keys; roll back a narrower prefix, or to a later revision`);
  }
  if (outcome.outcome === 'moved') throw new KvbError('conflict', 'the bucket kept changing while the rollback was planned; try again');
  if (outcome.outcome !== 'ok') return pastValue<never>(outcome, target, reply);
  const { plan } = outcome;
  const revision = 'revision' in outcome ? outcome.revision : plan.from;
  const changes = plan.changes.map(({ key, from, to }) => ({
    key,
    action: to ? 'set' : 'delete',
    from: from ? { type: from.type, size: from.data.length, rev: from.revision } : null,
    to: to ? { type: to.type, size: to.data.length } : null,
  }));
  reply.header('kvb-revision', String(revision));
  return reply.code(200).send({ rollback_to: target, prefix, dry_run: dryRun, revision, changed: changes.length, changes });
}
