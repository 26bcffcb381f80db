import { randomBytes, randomUUID } from 'node:crypto';
import formbody from '@fastify/formbody';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { anonymousAccess } from '../../auth/access.js';
import { type CredentialSlot, bucketSalt, hashCredential, newCredentialSalt } from '../../auth/credential-hash.js';
import { KvbError, badRequest } from '../../errors.js';
import type { BucketChanges, BucketRecord } from '../../store/store.js';
import { authorize, openBucket, principalFor } from '../access-control.js';
import { credentialMatches } from '../operator-key.js';
import type { CreationLimiter } from '../plugins/rate-limits.js';
import type { ServerContext } from '../server-context.js';
import { bucketIdOf, formBody, formField, parseInteger } from '../request-input.js';
import { bucketSchemas } from './bucket-schemas.js';
import { MAX_TTL_SECONDS } from '../../limits.js';

const FORM_LIMIT = 16 * 1024;
const CREATE_FIELDS = ['email', 'secret_key', 'read_key', 'write_key', 'signing_key', 'default_ttl'] as const;

/**
 * A PATCH body as its schema (`bucketSchemas.update`, compiled by Ajv) lets it through: an object
 * of these fields only, each of its type (a number finite). The schema is the check of that shape
 * and answers its refusals; the handler checks only what those refusals do not say: a credential
 * is not empty, and default_ttl is in range (each with its own words, which the schema's would change).
 */
interface PolicyPatch {
  secret_key?: string | number;
  read_key?: string | number | null;
  write_key?: string | number | null;
  signing_key?: string | number | null;
  default_ttl?: number | null;
}

/** A credential value from a PATCH body: a non-empty string or a number sets it, null clears it. */
function credentialValue(name: string, value: string | number): string;
function credentialValue(name: string, value: string | number | null): string | null;
function credentialValue(name: string, value: string | number | null): string | null {
  if (value === '') throw badRequest(`${name} must be a non-empty string, a number or null`);
  return value === null ? null : String(value);
}

/** 256 random bits, the secret half of the key tokens are signed with (see auth/tokens.ts). */
const newTokenSalt = () => randomBytes(32).toString('hex');

const hashOrNull = (value: string | null, slot: CredentialSlot, salt: string) =>
  value === null ? null : hashCredential(value, slot, salt);

type BucketContext = ServerContext & { limitCreation?: CreationLimiter };
type BucketRecordWriter = (record: BucketRecord) => Promise<unknown>;

/** Bucket creation (form) and the policy routes: GET, HEAD, PATCH, DELETE on /api/v1/{bucket}. */
export async function bucketRoutes(app: FastifyInstance, ctx: BucketContext): Promise<void> {
  const createBucket = bucketCreator(ctx);
  // Forms are parsed only where the spec uses them: in this plugin, creation.
  await app.register(async (forms) => {
    forms.removeAllContentTypeParsers();
    await forms.register(formbody, { bodyLimit: FORM_LIMIT });
    const create = (request: FastifyRequest, reply: FastifyReply) => createBucketFromForm(ctx, createBucket, request, reply);
    forms.post('/api/v1/', { schema: bucketSchemas.create }, create);
    forms.post('/api/v1', { schema: { ...bucketSchemas.create, hide: true } }, create);
  });
  app.get('/api/v1/:bucket', { schema: bucketSchemas.policy }, (request, reply) => bucketPolicy(ctx, request, reply));
  const headOptions = { schema: bucketSchemas.head, config: { swagger: { exposeHeadRoute: true } } };
  app.head('/api/v1/:bucket', headOptions, (request, reply) => bucketExists(ctx, request, reply));
  app.patch('/api/v1/:bucket', { schema: bucketSchemas.update }, (request, reply) => updateBucket(ctx, request, reply));
  const remove = (request: FastifyRequest, reply: FastifyReply) => deleteBucket(ctx, request, reply);
  app.delete('/api/v1/:bucket', { schema: bucketSchemas.delete }, remove);
  app.delete('/api/v1/:bucket/', { schema: bucketSchemas.deleteSlash }, remove);
}

const serverFull = (maxBuckets: number) => new KvbError('insufficient_storage', `this server holds its maximum of ${maxBuckets} buckets`);

/** Stores a new bucket; with --max-buckets, creations run one at a time on this instance so the count cannot be overtaken. */
export function bucketCreator({ store, config }: ServerContext): BucketRecordWriter {
  let creating: Promise<unknown> = Promise.resolve();
  return async (record) => {
    if (config.maxBuckets === 0) return store.buckets.create(record);
    const run = async () => {
      if ((await store.buckets.count()) >= config.maxBuckets) throw serverFull(config.maxBuckets);
      await store.buckets.create(record);
    };
    const next = creating.then(run, run);
    creating = next.catch(() => undefined);
    return next;
  };
}

/** `POST /api/v1/` with a form: a new bucket, its id in the body and Location. */
async function createBucketFromForm(
  { store, config, limitCreation }: BucketContext,
  createBucket: BucketRecordWriter,
  request: FastifyRequest,
  reply: FastifyReply,
) {
  if (config.bucketCreationKey !== undefined && !credentialMatches(request, config.bucketCreationKey)) {
    throw new KvbError('unauthorized', 'creating a bucket needs the operator bucket-creation key');
  }
  // Before any hashing: a refused creation costs next to nothing.
  if (limitCreation) await limitCreation(request, reply);
  const body = formBody(request, CREATE_FIELDS);
  const field = (name: (typeof CREATE_FIELDS)[number]) => formField(body, name) || undefined;
  const email = field('email');
  if (!email || email.length > 254 || !email.includes('@')) throw badRequest('email is required (1 to 254 characters with an @)');
  const secretKey = field('secret_key');
  if (config.requireSecretKey && !secretKey) throw badRequest('this server requires a secret_key for every bucket');
  const ttlText = field('default_ttl');
  // Checked again when creating; this first look spares the hashing when the server is full.
  if (config.maxBuckets > 0 && (await store.buckets.count()) >= config.maxBuckets) throw serverFull(config.maxBuckets);
  // One salt for the bucket's keys: a presented credential then costs one scrypt run for all three.
  const salt = newCredentialSalt();
  const [secretKeyHash, readKeyHash, writeKeyHash] = await Promise.all([
    hashOrNull(secretKey ?? null, 'admin', salt),
    hashOrNull(field('read_key') ?? null, 'read', salt),
    hashOrNull(field('write_key') ?? null, 'write', salt),
  ]);
  const record: BucketRecord = {
    id: randomUUID(),
    email,
    secretKeyHash,
    readKeyHash,
    writeKeyHash,
    signingKey: field('signing_key') ?? null,
    signingKeyGeneration: 0,
    tokenSalt: newTokenSalt(),
    defaultTtl: ttlText === undefined ? config.defaultTtl : parseInteger(ttlText, 'default_ttl', 0, MAX_TTL_SECONDS),
  };
  await createBucket(record);
  return reply.code(201).header('location', `/api/v1/${record.id}`).type('text/plain; charset=utf-8').send(record.id);
}

/** `GET /api/v1/{bucket}`: the policy, with the revision, history floor, usage and quotas as headers. */
async function bucketPolicy({ store, buckets, config }: ServerContext, request: FastifyRequest, reply: FastifyReply) {
  const { bucket, principal } = await openBucket(buckets, bucketIdOf(request), request);
  authorize(bucket, principal, 'manage');
  const { record, flags } = bucket;
  const revision = await store.buckets.revision(record.id);
  if (revision === undefined) throw new KvbError('not_found', 'no such bucket');
  reply.header('kvb-revision', String(revision));
  // History: the oldest revision that can still be read, listed or rolled back to.
  const bounds = await store.changes.bounds(record.id);
  if (bounds) reply.header('kvb-history-floor', String(bounds.floor));
  // Usage, and the quotas when set, as headers: the spec's policy body keeps its shape.
  const usage = await store.buckets.usage(record.id);
  if (usage) reply.header('kvb-usage-keys', String(usage.keys)).header('kvb-usage-bytes', String(usage.bytes));
  if (config.maxKeysPerBucket > 0) reply.header('kvb-quota-keys', String(config.maxKeysPerBucket));
  if (config.maxBytesPerBucket > 0) reply.header('kvb-quota-bytes', String(config.maxBytesPerBucket));
  return {
    default_ttl: record.defaultTtl,
    has_secret_key: flags.hasSecretKey,
    has_read_key: flags.hasReadKey,
    has_write_key: flags.hasWriteKey,
    has_signing_key: record.signingKey !== null,
    signing_key_generation: record.signingKeyGeneration,
    anonymous_access: anonymousAccess(flags),
  };
}

/** `HEAD /api/v1/{bucket}`, the spec's: 404 unless the bucket exists and the caller has admin access, whatever the reason. */
async function bucketExists({ buckets }: ServerContext, request: FastifyRequest, reply: FastifyReply) {
  const bucket = await buckets.get(bucketIdOf(request));
  const principal = bucket && (await principalFor(buckets, bucket, request).catch(() => undefined));
  if (!bucket || !principal) return reply.code(404).send();
  try {
    authorize(bucket, principal, 'manage');
  } catch {
    return reply.code(404).send();
  }
  return reply.code(200).send();
}

/** `PATCH /api/v1/{bucket}`: sets or clears credentials and the default TTL. */
async function updateBucket({ store, buckets }: ServerContext, request: FastifyRequest, reply: FastifyReply) {
  const id = bucketIdOf(request);
  const { bucket, principal } = await openBucket(buckets, id, request);
  authorize(bucket, principal, 'manage');
  const changes = await bucketChanges(bucket.record, request.body as PolicyPatch);
  if (Object.keys(changes).length > 0) {
    const updated = await store.buckets.update(id, changes);
    buckets.invalidate(id);
    if (!updated) throw new KvbError('not_found', 'no such bucket');
  }
  return reply.code(204).send();
}

/** What a PATCH body's fields change in the bucket's record, new keys hashed. */
async function bucketChanges(record: BucketRecord, fields: PolicyPatch): Promise<BucketChanges> {
  const changes: BucketChanges = {};
  // New keys join the salt of the keys kept (legacy-format keys move over as they are set).
  const { secretKeyHash, readKeyHash, writeKeyHash } = record;
  const salt = bucketSalt([
    'secret_key' in fields ? null : secretKeyHash,
    'read_key' in fields ? null : readKeyHash,
    'write_key' in fields ? null : writeKeyHash,
  ]);
  if (fields.secret_key !== undefined) {
    changes.secretKeyHash = await hashCredential(credentialValue('secret_key', fields.secret_key), 'admin', salt);
  }
  if (fields.read_key !== undefined) changes.readKeyHash = await hashOrNull(credentialValue('read_key', fields.read_key), 'read', salt);
  if (fields.write_key !== undefined)
    changes.writeKeyHash = await hashOrNull(credentialValue('write_key', fields.write_key), 'write', salt);
  if (fields.signing_key !== undefined) {
    changes.signingKey = credentialValue('signing_key', fields.signing_key);
    changes.tokenSalt = newTokenSalt();
  }
  if (fields.default_ttl !== undefined) {
    const ttl = fields.default_ttl;
    if (ttl === null) changes.defaultTtl = 0;
    else if (ttl >= 0 && ttl <= MAX_TTL_SECONDS) changes.defaultTtl = ttl;
    else throw badRequest(`default_ttl must be an integer from 0 to ${MAX_TTL_SECONDS}, or null`);
  }
  return changes;
}

/** `DELETE /api/v1/{bucket}`: the bucket, its keys and its webhooks. */
async function deleteBucket({ store, buckets }: ServerContext, request: FastifyRequest, reply: FastifyReply) {
  const id = bucketIdOf(request);
  const { bucket, principal } = await openBucket(buckets, id, request);
  authorize(bucket, principal, 'manage');
  const deleted = await store.buckets.delete(id);
  buckets.invalidate(id);
  // Its webhooks go with it (a delivery that finds the bucket gone removes them too).
  if (deleted) await store.webhooks.removeBucket(id);
  if (!deleted) throw new KvbError('not_found', 'no such bucket');
  return reply.code(204).send();
}
