import type { FastifyInstance, FastifyRequest } from 'fastify';
import { KvbError, badRequest } from '../../errors.js';
import type { Entry } from '../../store/store.js';
import { type ParsedNumber, addNumbers, formatNumber, parseDelta, parseNumber } from '../../values/numbers.js';
import { inferValue } from '../../values/infer-value.js';
import { MAX_VALUE_BYTES, decodeKey } from '../../values/keys.js';
import { minifyJson } from '../../values/json-source.js';
import { authorize, openBucket } from '../access-control.js';
import type { ServerContext } from '../server-context.js';
import { MAX_TTL_SECONDS, expiryFor, methodNotAllowed, optionalInteger, queryOf, splitKeyPath } from '../request-input.js';
import { describeValue } from './values-reply.js';
import { keySchemas } from './schemas.js';

/** The numeric value of a stored entry, for the counter; undefined when it is not a number. */
function numericValue(entry: Entry): ParsedNumber | undefined {
  if (entry.type === 'int64' || entry.type === 'float64') return parseNumber(entry.data.toString('utf8'));
  if (entry.type === 'json') return parseNumber(minifyJson(entry.data.toString('utf8')));
  return undefined;
}

/**
 * Key routes: GET, HEAD, POST/PUT (set), DELETE, PATCH (counter) on /api/v1/{bucket}/{key}.
 * The key is taken from the raw URL and percent-decoded exactly once. Bodies are read raw,
 * whatever their Content-Type (none included), and never past the value limit.
 */
export async function keyRoutes(app: FastifyInstance, { store, buckets }: ServerContext): Promise<void> {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: MAX_VALUE_BYTES }, (_request, body, done) =>
    done(null, body),
  );

  async function target(request: FastifyRequest) {
    const { bucket: bucketId, encodedKey } = splitKeyPath(request);
    // `/api/v1/{bucket}/` with a method that listing does not serve lands here with no key.
    if (encodedKey === '') throw methodNotAllowed(['GET', 'DELETE']);
    const key = decodeKey(encodedKey);
    const { bucket, principal } = await openBucket(buckets, bucketId, request);
    return { key, bucket, principal };
  }

  const read = async (request: FastifyRequest) => {
    const { key, bucket, principal } = await target(request);
    authorize(bucket, principal, 'read', key);
    const entry = await store.getEntry(bucket.record.id, key, Date.now());
    if (!entry) throw new KvbError('not_found', 'no such key');
    return entry;
  };

  app.get('/api/v1/:bucket/*', { schema: keySchemas.get }, async (request, reply) => {
    const entry = await read(request);
    return describeValue(reply, entry).send(entry.data);
  });

  app.head('/api/v1/:bucket/*', { schema: keySchemas.head, config: { swagger: { exposeHeadRoute: true } } }, async (request, reply) => {
    const entry = await read(request);
    return describeValue(reply, entry).send();
  });

  const set = async (request: FastifyRequest, reply: import('fastify').FastifyReply) => {
    const { key, bucket, principal } = await target(request);
    authorize(bucket, principal, 'write', key);
    const ttl = optionalInteger(queryOf(request), 'ttl', 0, MAX_TTL_SECONDS);
    const body = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
    const value = inferValue(body, request.headers['content-type']);
    const expiresAt = expiryFor(ttl ?? bucket.record.defaultTtl, Date.now());
    await store.setEntry(bucket.record.id, key, value, expiresAt);
    return describeValue(reply, { ...value, expiresAt }).code(200).send(value.data);
  };
  app.post('/api/v1/:bucket/*', { schema: keySchemas.set }, set);
  app.put('/api/v1/:bucket/*', { schema: keySchemas.put }, set);

  app.delete('/api/v1/:bucket/*', { schema: keySchemas.delete }, async (request, reply) => {
    const { key, bucket, principal } = await target(request);
    authorize(bucket, principal, 'delete', key);
    const deleted = await store.deleteEntry(bucket.record.id, key, Date.now());
    if (!deleted) throw new KvbError('not_found', 'no such key');
    return reply.code(204).send();
  });

  app.patch('/api/v1/:bucket/*', { schema: keySchemas.counter }, async (request, reply) => {
    const { key, bucket, principal } = await target(request);
    authorize(bucket, principal, 'write', key);
    const ttl = optionalInteger(queryOf(request), 'ttl', 0, MAX_TTL_SECONDS);
    const body = Buffer.isBuffer(request.body) ? request.body.toString('utf8') : '';
    const delta = parseDelta(body);
    if (!delta) throw badRequest('delta must be +N or -N with N a decimal number');
    const now = Date.now();
    const updated = await store.updateEntry(bucket.record.id, key, now, (current) => {
      let next = delta;
      if (current) {
        const value = numericValue(current);
        if (!value) throw badRequest(`stored value is ${current.type}, not a number`);
        const sum = addNumbers(value, delta);
        if (!sum.ok) throw badRequest(sum.reason);
        next = sum.value;
      }
      const expiresAt =
        ttl !== undefined ? expiryFor(ttl, now) : current ? current.expiresAt : expiryFor(bucket.record.defaultTtl, now);
      return { type: next.kind, data: Buffer.from(formatNumber(next)), expiresAt };
    });
    return describeValue(reply, updated).code(200).send(updated.data);
  });
}
