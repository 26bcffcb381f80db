import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { KvbError, badRequest } from '../../errors.js';
import { type Condition, type Entry, isRefusal } from '../../store/store.js';
import { decodeKey, valueTooLarge } from '../../values/keys.js';
import { actorOf, authorize, openBucket, openBucketNow } from '../access-control.js';
import type { CachedBucket } from '../bucket-cache.js';
import type { Principal } from '../../auth/access.js';
import { parseEntityTags, readOutcome, refusalError, revisionHeaders, writeCondition } from '../conditions.js';
import type { ServerContext } from '../server-context.js';
import { methodNotAllowed, optionalInteger, queryOf, splitKeyPath } from '../request-input.js';
import { describeValue } from './values-reply.js';
import { takePreread } from '../fast-lane.js';
import { replayBody, takeWritten } from '../write-lane.js';
import type { CounterOp, DeleteOp, SetOp, WriteOp } from '../../store/core/write-ops.js';
import { counterDelta, counterOp, deleteOp, setOp } from './key-writes.js';
import { keySchemas } from './key-schemas.js';
import { asksForPast, readPast } from './history-routes.js';
import { MAX_TTL_SECONDS } from '../../limits.js';

/**
 * Key routes: GET, HEAD, POST/PUT (set), DELETE, PATCH (counter) on /api/v1/{bucket}/{key}.
 * The key is taken from the raw URL and percent-decoded exactly once. Bodies are read raw,
 * whatever their Content-Type (none included), and never past the value limit.
 */
export async function keyRoutes(app: FastifyInstance, ctx: ServerContext): Promise<void> {
  const { config } = ctx;
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: config.maxValueBytes }, (_request, body, done) => done(null, body));
  // Fastify's own words for a body past the limit ("Request body is too large") name no limit;
  // rethrown in kvb's, the parent handler answers it in the envelope (400, as before).
  app.setErrorHandler((error, request) => {
    if ((error as { code?: string }).code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
      throw badRequest(valueTooLarge(Number(request.headers['content-length']) || undefined, config.maxValueBytes));
    }
    throw error;
  });

  app.get('/api/v1/:bucket/*', { schema: keySchemas.get }, (request, reply) => {
    const data = readKey(ctx, request, reply);
    if (data instanceof Promise) return data.then((d) => reply.send(d));
    reply.send(data);
    return undefined;
  });
  app.head('/api/v1/:bucket/*', { schema: keySchemas.head, config: { swagger: { exposeHeadRoute: true } } }, (request, reply) => {
    const data = readKey(ctx, request, reply);
    if (data instanceof Promise) return data.then(() => reply.send());
    reply.send();
    return undefined;
  });
  // A write the write lane read the body of and handed over (a refusal) is parsed from that body.
  const writeOptions = { preParsing: replayBody };
  const set = (request: FastifyRequest, reply: FastifyReply) => setKey(ctx, request, reply);
  app.post('/api/v1/:bucket/*', { schema: keySchemas.set, ...writeOptions }, set);
  app.put('/api/v1/:bucket/*', { schema: keySchemas.put, ...writeOptions }, set);
  app.delete('/api/v1/:bucket/*', { schema: keySchemas.delete }, (request, reply) => deleteKey(ctx, request, reply));
  app.patch('/api/v1/:bucket/*', { schema: keySchemas.counter, ...writeOptions }, (request, reply) => addToCounter(ctx, request, reply));
}

/** The bucket id and decoded key a key route names. */
export function keyOf(request: FastifyRequest): { bucketId: string; key: string } {
  const { bucket: bucketId, encodedKey } = splitKeyPath(request);
  // `/api/v1/{bucket}/` with a method that listing does not serve lands here with no key.
  if (encodedKey === '') throw methodNotAllowed(['GET', 'DELETE']);
  return { bucketId, key: decodeKey(encodedKey) };
}

/**
 * The key a write names, its bucket opened for the caller; with `made`, the outcome of the write
 * the write lane already made for this request (write-lane.ts), settled before anything else: its
 * storage error or refusal is the answer. The lane made every check the route would, on its own
 * target; making one again could fail where it did not (a shared store's bucket cache reloads
 * every second, through the very outage that failed the write), and a write of unknown outcome
 * would be answered as a plain refusal.
 */
async function writeTarget<O extends WriteOp>(buckets: ServerContext['buckets'], request: FastifyRequest) {
  const lane = takeWritten<O>(request.raw);
  if (lane) {
    const outcome = await lane.result;
    if (isRefusal(outcome)) throw refusalError(outcome);
    return { ...lane.target, made: { outcome } };
  }
  const { bucketId, key } = keyOf(request);
  const { bucket, principal } = await openBucket(buckets, bucketId, request);
  return { key, bucket, principal, made: undefined };
}

/**
 * GET and HEAD: the live entry's bytes, or (under If-Match / If-None-Match) 412 or 304 with its
 * ETag. Answers without a promise when nothing needs waiting for: the bucket and the caller's
 * credential are cached and the store reads synchronously (SQLite). The promise hops of the
 * async path measured about 1 µs per GET.
 */
function readKey(ctx: ServerContext, request: FastifyRequest, reply: FastifyReply): Buffer | undefined | Promise<Buffer | undefined> {
  const { bucketId, key } = keyOf(request);
  const opened = openBucketNow(ctx.buckets, bucketId, request.headers.authorization, queryOf(request));
  if (!opened)
    return openBucket(ctx.buckets, bucketId, request).then(({ bucket, principal }) =>
      readOpened(ctx, request, reply, { bucket, principal, key }),
    );
  return readOpened(ctx, request, reply, { bucket: opened.bucket, principal: opened.principal, key });
}

/** A read once its bucket is open: the caller's permission, the conditions, then the entry (live or past). */
function readOpened(
  { store, clock }: ServerContext,
  request: FastifyRequest,
  reply: FastifyReply,
  { bucket, principal, key }: { bucket: CachedBucket; principal: Principal; key: string },
) {
  authorize(bucket, principal, 'read', key);
  // Malformed condition headers are a 400 whether or not the key exists; so is an unknown Kvb-Include.
  const ifMatch = parseEntityTags(request.headers['if-match'], 'If-Match');
  parseEntityTags(request.headers['if-none-match'], 'If-None-Match');
  wantsCreateRevision(request.headers['kvb-include']);
  // History: `rev=N` or `history=true` reads the past; without them nothing changes.
  if (asksForPast(request))
    return readPast(store, clock, request, reply, bucket, principal, key, (entry) => answerRead(request, reply, ifMatch, entry));
  // The fast lane read this key already (a miss, or the read failed): answered from that read.
  const read = takePreread(request.raw);
  if (read !== undefined) {
    if ('error' in read) throw read.error;
    return answerRead(request, reply, ifMatch, read.entry);
  }
  const now = clock();
  if (store.getEntryNow) return answerRead(request, reply, ifMatch, store.getEntryNow(bucket.record.id, key, now));
  return store.getEntry(bucket.record.id, key, now).then((entry) => answerRead(request, reply, ifMatch, entry));
}

/** The answer to a read of `entry`: 404, 412 or 304 by the conditions, else the value with its headers. */
export function answerRead(
  request: FastifyRequest,
  reply: FastifyReply,
  ifMatch: ReturnType<typeof parseEntityTags>,
  entry: Entry | undefined,
): Buffer | undefined {
  if (!entry) {
    // If-Match on an absent key fails (RFC 9110 13.1.1); the spec's 404 answers everything else.
    if (ifMatch !== undefined) throw new KvbError('precondition_failed', 'the key is absent or expired');
    throw new KvbError('not_found', 'no such key');
  }
  const outcome = readOutcome(request.headers, entry);
  if (outcome === 'precondition_failed') throw refusalError({ refused: 'precondition', current: entry });
  if (outcome === 'not_modified') {
    reply.code(304).headers(revisionHeaders(entry.revision));
    return undefined;
  }
  describeValue(reply, entry);
  if (entry.createRevision !== undefined && wantsCreateRevision(request.headers['kvb-include'])) {
    reply.header('kvb-create-revision', String(entry.createRevision));
  }
  return entry.data;
}

/** POST and PUT: the body becomes the key's value. */
async function setKey({ store, buckets, clock }: ServerContext, request: FastifyRequest, reply: FastifyReply) {
  const { key, bucket, principal, made } = await writeTarget<SetOp>(buckets, request);
  authorize(bucket, principal, 'write', key);
  const ttl = optionalInteger(queryOf(request), 'ttl', 0, MAX_TTL_SECONDS);
  const condition = conditionFor(request, bucket, principal, key);
  const body = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
  const write = { key, bucket, ttl, condition, actor: actorOf(principal, request) };
  const op = setOp(write, body, request.headers['content-type'], clock());
  const written = made ? made.outcome : await store.write(bucket.record.id, op);
  if (isRefusal(written)) throw refusalError(written);
  return describeValue(reply, { ...op.value, expiresAt: op.expiresAt, revision: written.revision })
    .code(200)
    .send(op.value.data);
}

async function deleteKey({ store, buckets, clock }: ServerContext, request: FastifyRequest, reply: FastifyReply) {
  const { key, bucket, principal, made } = await writeTarget<DeleteOp>(buckets, request);
  authorize(bucket, principal, 'delete', key);
  const condition = conditionFor(request, bucket, principal, key);
  const op = deleteOp({ key, bucket, condition, actor: actorOf(principal, request) }, clock());
  const outcome = made ? made.outcome : await store.write(bucket.record.id, op);
  if (isRefusal(outcome)) throw refusalError(outcome);
  if (!outcome.deleted) throw new KvbError('not_found', 'no such key');
  return reply.code(204).header('kvb-revision', String(outcome.revision)).send();
}

/** PATCH: the body is the delta added to the key's counter. */
async function addToCounter({ store, buckets, clock }: ServerContext, request: FastifyRequest, reply: FastifyReply) {
  const { key, bucket, principal, made } = await writeTarget<CounterOp>(buckets, request);
  authorize(bucket, principal, 'write', key);
  const ttl = optionalInteger(queryOf(request), 'ttl', 0, MAX_TTL_SECONDS);
  const delta = counterDelta(Buffer.isBuffer(request.body) ? request.body.toString('utf8') : '');
  const condition = conditionFor(request, bucket, principal, key);
  const op = counterOp({ key, bucket, ttl, condition, actor: actorOf(principal, request) }, delta, clock());
  const updated = made ? made.outcome : await store.write(bucket.record.id, op);
  if (isRefusal(updated)) throw refusalError(updated);
  return describeValue(reply, updated).code(200).send(updated.data);
}

/**
 * `Kvb-Include: create-revision` on a GET or HEAD asks for the key's create revision (its fencing
 * token) in `Kvb-Create-Revision`. Asked for rather than always sent: every other GET keeps its
 * answer byte for byte (test/http/answer-headers.test.ts) and its cost. Anything else is a 400.
 */
function wantsCreateRevision(value: string | string[] | undefined): boolean {
  if (value === undefined) return false;
  const names = (Array.isArray(value) ? value.join(',') : value).split(',').map((s) => s.trim().toLowerCase());
  const unknown = names.find((name) => name !== 'create-revision');
  if (unknown !== undefined) throw badRequest(`Kvb-Include takes create-revision, not ${JSON.stringify(unknown)}`);
  return true;
}

/**
 * A write's If-Match / If-None-Match, which need read permission on the key as a transaction's
 * `check` does (etcd's rule for compares): the 412 names the key's revision, and whether the key
 * exists, so a caller who may write but not read must not learn them from it.
 */
function conditionFor(request: FastifyRequest, bucket: CachedBucket, principal: Principal, key: string): Condition | undefined {
  const condition = writeCondition(request.headers);
  if (condition !== undefined) authorize(bucket, principal, 'read', key);
  return condition;
}
