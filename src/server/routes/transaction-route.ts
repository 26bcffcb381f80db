import type { FastifyInstance } from 'fastify';
import { badRequest } from '../../errors.js';
import type { TxnOp } from '../../store/store.js';
import { type JsonNode, JsonSyntaxError, parseJsonSource } from '../../values/json-source.js';
import { MAX_VALUE_BYTES, checkKey } from '../../values/keys.js';
import { mediaType } from '../../values/infer-value.js';
import { authorize, openBucket } from '../access-control.js';
import type { ServerContext } from '../server-context.js';
import { MAX_TTL_SECONDS, decodeBucket, expiryFor, parseInteger } from '../request-input.js';
import { bucketSchemas } from './schemas.js';

export const MAX_TXN_OPS = 1000;
const TXN_BODY_LIMIT = 20 * 1024 * 1024;

type Member = [string, JsonNode];

/** Turns one `{"set":…}` / `{"delete":…}` node into an operation, or throws a 400 naming it. */
function parseOperation(node: JsonNode, at: string, defaultTtl: number, now: number): TxnOp {
  if (node.kind !== 'object') throw badRequest(`${at} must be an object`);
  const names = node.entries.map(([name]) => name);
  if (new Set(names).size !== names.length) throw badRequest(`${at} repeats a field`);
  const field = (name: string) => node.entries.find((m: Member) => m[0] === name)?.[1];
  const keyOf = (n: JsonNode | undefined) => {
    if (n?.kind !== 'string') throw badRequest(`${at}: the key must be a string`);
    return checkKey(n.value, `${at} key`);
  };
  if (names.includes('delete')) {
    if (names.length !== 1) throw badRequest(`${at}: a delete takes no other fields`);
    return { op: 'delete', key: keyOf(field('delete')) };
  }
  if (!names.includes('set')) throw badRequest(`${at} must be {"set":…,"value":…} or {"delete":…}`);
  const unknown = names.find((n) => !['set', 'value', 'ttl'].includes(n));
  if (unknown) throw badRequest(`${at}: unknown field ${unknown}`);
  const key = keyOf(field('set'));
  const value = field('value');
  if (!value) throw badRequest(`${at}: value is required`);
  if (value.kind === 'null') throw badRequest(`${at}: value cannot be null`);
  const data = Buffer.from(value.kind === 'string' ? value.value : value.source, 'utf8');
  if (data.length > MAX_VALUE_BYTES) throw badRequest(`${at}: value is larger than ${MAX_VALUE_BYTES} bytes`);
  const ttlNode = field('ttl');
  let ttl = defaultTtl;
  if (ttlNode) {
    if (ttlNode.kind !== 'number') throw badRequest(`${at}: ttl must be an integer`);
    ttl = parseInteger(ttlNode.source, `${at} ttl`, 0, MAX_TTL_SECONDS);
  }
  return {
    op: 'set',
    key,
    value: { type: value.kind === 'string' ? 'text' : 'json', data },
    expiresAt: expiryFor(ttl, now),
  };
}

/** `POST /api/v1/{bucket}` with `{"txn":[…]}`: every operation is checked first, then all commit together. */
export async function transactionRoute(app: FastifyInstance, { store, buckets }: ServerContext): Promise<void> {
  // The body stays text: values are stored as the exact JSON the client wrote.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'string', bodyLimit: TXN_BODY_LIMIT }, (request, body, done) => {
    if (mediaType(request.headers['content-type']) !== 'application/json') {
      done(badRequest('a transaction body must be application/json'), undefined);
    } else done(null, body);
  });

  app.post(
    '/api/v1/:bucket',
    {
      schema: bucketSchemas.transaction,
      bodyLimit: TXN_BODY_LIMIT,
      // The JSON schema above documents the body; parseOperation enforces it on the raw text.
      validatorCompiler: () => () => true,
    },
    async (request, reply) => {
      const { bucket, principal } = await openBucket(buckets, decodeBucket((request.params as { bucket: string }).bucket), request);
      let root: JsonNode;
      try {
        root = parseJsonSource(typeof request.body === 'string' ? request.body : '');
      } catch (err) {
        if (err instanceof JsonSyntaxError) throw badRequest(err.message);
        throw err;
      }
      if (root.kind !== 'object') throw badRequest('body must be {"txn":[…]}');
      const extra = root.entries.find(([name]) => name !== 'txn');
      if (extra || root.entries.length !== 1) throw badRequest(`body must be {"txn":[…]} and nothing else`);
      const list = root.entries[0]![1];
      if (list.kind !== 'array') throw badRequest('txn must be an array');
      if (list.items.length === 0) throw badRequest('txn is empty');
      if (list.items.length > MAX_TXN_OPS) throw badRequest(`txn has more than ${MAX_TXN_OPS} operations`);
      const now = Date.now();
      const ops = list.items.map((node, i) => parseOperation(node, `txn[${i}]`, bucket.record.defaultTtl, now));
      for (const op of ops) authorize(bucket, principal, op.op === 'set' ? 'write' : 'delete', op.key);
      await store.commit(bucket.record.id, ops);
      return reply.code(204).send();
    },
  );
}
