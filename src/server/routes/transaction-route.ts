import { isUtf8 } from 'node:buffer';
import { type Readable, Transform } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { KvbError, badRequest } from '../../errors.js';
import type { OpResult, TxnRequestOp } from '../../store/store.js';
import { checkPrefixDeletes } from '../../store/core/txn-resolution.js';
import { entryLine, typedValue } from '../../values/export-format.js';
import { type JsonLimits, JsonLimitError, type JsonNode, JsonSyntaxError, parseJsonSource } from '../../values/json-source.js';
import { checkKey, valueTooLarge } from '../../values/keys.js';
import { type ValueType, isValueType } from '../../values/value-type.js';
import { mediaType } from '../../values/infer-value.js';
import { allows } from '../../auth/access.js';
import { actorOf, authorize, openBucket } from '../access-control.js';
import type { ServerContext } from '../server-context.js';
import { bucketIdOf, expiryFor, parseInteger } from '../request-input.js';
import { transactionSchema } from './transaction-schema.js';
import { IMPORT_MEDIA_TYPES, importRoute, isImportRequest } from './import-route.js';
import { isRollbackRequest, rollbackRoute } from './history-routes.js';
import { MAX_KEY_BYTES, MAX_TXN_OPS, MAX_VALUE_BYTES } from '../../limits.js';
import { TXN_OPERATIONS, txnFieldNames } from './txn-operations.js';

/**
 * Room per operation besides its key and value: `{"set":"","value":,"ttl":2147483647},` is 37
 * characters, the rest allows whitespace and a few escapes.
 */
const OPERATION_OVERHEAD = 256;
/**
 * The largest body 1,000 legal operations can need written plainly: each at most a 16 KiB value
 * (two quotes included in the overhead), a 128-byte key and the overhead, plus `{"txn":[]}`:
 * 1,000 × (16,384 + 128 + 256) + 64 = 16,768,064 bytes (16 MiB). A body past it is refused
 * while being read, before any parsing.
 */
export const TXN_BODY_LIMIT = MAX_TXN_OPS * (MAX_VALUE_BYTES + MAX_KEY_BYTES + OPERATION_OVERHEAD) + 64;

/** With --max-value-bytes raised, one value as large as the limit (every byte escaped) must still fit. */
export const txnBodyLimit = (maxValueBytes: number) => Math.max(TXN_BODY_LIMIT, 6 * maxValueBytes + CHECKS_BODY_LIMIT);

/**
 * The largest body of 1,000 checks: each key written with every byte escaped (`\u0001`, 6
 * characters per byte) plus the overhead: 1,000 × (768 + 256) + 64 = 1,024,064 bytes. A caller
 * who may read but neither write nor delete can only send checks, so its body is bounded here.
 */
export const CHECKS_BODY_LIMIT = MAX_TXN_OPS * (6 * MAX_KEY_BYTES + OPERATION_OVERHEAD) + 64;

const checksOnlyTooLarge = () =>
  badRequest(`a caller who may only read can send only checks and gets: body is larger than ${CHECKS_BODY_LIMIT} bytes`);

/** Passes the body through, failing (400) once it passes `limit` bytes (a body sent without Content-Length). */
function bounded(payload: Readable, limit: number): Readable {
  let received = 0;
  return payload.pipe(
    new Transform({
      transform(chunk: Buffer, _encoding, callback) {
        received += chunk.length;
        if (received > limit) callback(checksOnlyTooLarge());
        else callback(null, chunk);
      },
    }),
  );
}

/**
 * What parsing a transaction body may build: the body, the txn array, each operation and its
 * fields are nodes; a field's value (depth 3) is kept as source only, bounded to the value limit
 * while it is scanned. The txn array may run one past MAX_TXN_OPS so the route can say so by name.
 */
const txnJsonLimits = (maxValueBytes: number): JsonLimits => ({
  collapseDepth: 3,
  // UTF-16 units never outnumber UTF-8 bytes, so this bound never refuses a legal value.
  // A typed bytes value is base64: 4 characters per 3 bytes.
  maxValueLength: Math.ceil(maxValueBytes / 3) * 4,
  maxMembers: [8, MAX_TXN_OPS + 1, 16],
});

/** Per request: the bucket and caller resolved before the body was read. */
const opened = Symbol('kvb.txn.opened');
type OpenedRequest = FastifyRequest & { [opened]?: Awaited<ReturnType<typeof openBucket>> };

type Member = [string, JsonNode];

/** The operations that read the bucket as it was before the transaction's writes. */
const READING_OPS = ['get', 'expire', 'delete_prefix'] as const;
type ReadingOp = (typeof READING_OPS)[number];

const { check: CHECK, set: SET, expire: EXPIRE } = TXN_OPERATIONS;

/** An operation's node as its fields, with the helpers its parsers share. */
interface OperationNode {
  at: string;
  names: string[];
  field(name: string): JsonNode | undefined;
  keyOf(node: JsonNode | undefined): string;
  /** Throws a 400 naming the first field not in `allowed`. */
  onlyFields(allowed: readonly string[]): void;
}

function operationNode(node: JsonNode, at: string): OperationNode {
  if (node.kind !== 'object') throw badRequest(`${at} must be an object`);
  const names = node.entries.map(([name]) => name);
  if (new Set(names).size !== names.length) throw badRequest(`${at} repeats a field`);
  return {
    at,
    names,
    field: (name) => node.entries.find((m: Member) => m[0] === name)?.[1],
    keyOf: (n) => {
      if (n?.kind !== 'string') throw badRequest(`${at}: the key must be a string`);
      return checkKey(n.value, `${at} key`);
    },
    onlyFields: (allowed) => {
      const unknownField = names.find((n) => !allowed.includes(n));
      if (unknownField) throw badRequest(`${at}: unknown field ${unknownField}`);
    },
  };
}

/** Turns one `{"set":…}` / `{"delete":…}` / `{"check":…}` / reading node into an operation, or throws a 400 naming it. */
export function parseOperation(node: JsonNode, at: string, defaultTtl: number, now: number, maxValueBytes: number): TxnRequestOp {
  const op = operationNode(node, at);
  const { names } = op;
  if (names.includes('check')) return parseCheck(op);
  for (const name of READING_OPS) {
    if (names.includes(name)) return parseReadingOp(op, name, now);
  }
  if (names.includes('delete')) {
    if (names.length !== txnFieldNames('delete').length) throw badRequest(`${at}: a delete takes no other fields`);
    return { op: 'delete', key: op.keyOf(op.field('delete')) };
  }
  if (!names.includes('set')) {
    throw badRequest(
      `${at} must be {"set":…,"value":…}, {"delete":…}, {"check":…,"rev"|"exists"|"created":…}, {"get":…}, {"expire":…,"ttl":…} or {"delete_prefix":…}`,
    );
  }
  return parseSet(op, defaultTtl, now, maxValueBytes);
}

/** `{"check":K,"rev"|"exists"|"created":…}`. */
function parseCheck({ at, field, keyOf, onlyFields }: OperationNode): TxnRequestOp {
  const key = keyOf(field('check'));
  onlyFields(txnFieldNames('check'));
  if (CHECK.exactlyOne.filter((name) => field(name) !== undefined).length !== 1)
    throw badRequest(`${at}: a check takes exactly one of rev, exists and created`);
  const rev = field('rev');
  const exists = field('exists');
  const created = field('created');
  if (rev) {
    if (rev.kind !== 'number') throw badRequest(`${at}: rev must be an integer`);
    return { op: 'check', key, rev: parseInteger(rev.source, `${at} rev`, 0, CHECK.fields.rev.max) };
  }
  // A fencing token: the key is live and was created (last became live) at this revision.
  if (created) {
    if (created.kind !== 'number') throw badRequest(`${at}: created must be an integer`);
    return { op: 'check', key, created: parseInteger(created.source, `${at} created`, 0, CHECK.fields.created.max) };
  }
  if (exists?.kind !== 'boolean') throw badRequest(`${at}: exists must be true or false`);
  return { op: 'check', key, exists: exists.source === 'true' };
}

/** `{"get":K}`, `{"expire":K,"ttl":N}` or `{"delete_prefix":P}`. */
function parseReadingOp({ at, field, keyOf, onlyFields }: OperationNode, name: ReadingOp, now: number): TxnRequestOp {
  onlyFields(txnFieldNames(name));
  if (name === 'delete_prefix') {
    const prefix = field(name);
    if (prefix?.kind !== 'string' || prefix.value === '') throw badRequest(`${at}: delete_prefix takes a non-empty prefix string`);
    return { op: 'delete_prefix', key: checkKey(prefix.value, `${at} prefix`) };
  }
  const key = keyOf(field(name));
  if (name === 'get') return { op: 'get', key };
  const ttlNode = field('ttl');
  if (ttlNode?.kind !== 'number') throw badRequest(`${at}: expire takes ttl, an integer of seconds (0: never expires)`);
  return { op: 'expire', key, expiresAt: expiryFor(parseInteger(ttlNode.source, `${at} ttl`, 0, EXPIRE.fields.ttl.max), now) };
}

/** `{"set":K,"value":V}`, with `ttl` and `type` when given. */
function parseSet({ at, field, keyOf, onlyFields }: OperationNode, defaultTtl: number, now: number, maxValueBytes: number): TxnRequestOp {
  onlyFields(txnFieldNames('set'));
  const key = keyOf(field('set'));
  const value = field('value');
  if (!value) throw badRequest(`${at}: value is required`);
  if (value.kind === 'null') throw badRequest(`${at}: value cannot be null`);
  // An extension: `"type"` stores the value as that type, written as an export line writes it
  // (int64 a decimal string, bytes base64). Without it, the spec's rule: a string is text, else JSON.
  const typeNode = field('type');
  let type: ValueType = value.kind === 'string' ? 'text' : 'json';
  if (typeNode) {
    if (typeNode.kind !== 'string' || !isValueType(typeNode.value))
      throw badRequest(`${at}: type must be text, json, int64, float64 or bytes`);
    type = typeNode.value;
  }
  let data: Buffer;
  try {
    data = typeNode || value.kind === 'string' ? typedValue(type, value) : Buffer.from(value.source, 'utf8');
  } catch (err) {
    throw err instanceof KvbError ? badRequest(`${at}: ${err.detail}`) : err;
  }
  if (data.length > maxValueBytes) throw badRequest(`${at}: ${valueTooLarge(data.length, maxValueBytes)}`);
  const ttlNode = field('ttl');
  let ttl = defaultTtl;
  if (ttlNode) {
    if (ttlNode.kind !== 'number') throw badRequest(`${at}: ttl must be an integer`);
    ttl = parseInteger(ttlNode.source, `${at} ttl`, 0, SET.fields.ttl.max);
  }
  return { op: 'set', key, value: { type, data }, expiresAt: expiryFor(ttl, now) };
}

/** The permission each operation needs on its key (a prefix delete: on its prefix). */
const PERMISSION = { set: 'write', expire: 'write', delete: 'delete', delete_prefix: 'delete', check: 'read', get: 'read' } as const;

/**
 * The answer of a transaction with gets or prefix deletes: `{"revision":N,"results":[…]}`, one
 * result per operation: a get's key as the export writes it (int64 values as decimal strings) or
 * null when absent, `{"deleted":N}` for a prefix delete, null for the others.
 */
function resultsBody(revision: number, results: OpResult[]): string {
  const items = results.map((result) => {
    if (result?.op === 'delete_prefix') return `{"deleted":${result.deleted}}`;
    if (result?.op !== 'get' || !result.entry) return 'null';
    const { entry } = result;
    return entryLine(result.key, entry, entry.expiresAt, entry.revision).trimEnd();
  });
  return `{"revision":${revision},"results":[${items.join(',')}]}`;
}

/** `POST /api/v1/{bucket}` with `{"txn":[…]}`: every operation is checked first, then all commit together. */
export async function transactionRoute(app: FastifyInstance, ctx: ServerContext): Promise<void> {
  // The body stays text: values are stored as the exact JSON the client wrote.
  app.removeAllContentTypeParsers();
  const bodyLimit = txnBodyLimit(ctx.config.maxValueBytes);
  const jsonLimits = txnJsonLimits(ctx.config.maxValueBytes);
  // Read as bytes: decoded as a string, invalid UTF-8 would turn into U+FFFD without a word.
  app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit }, (request, body: Buffer, done) => {
    if (mediaType(request.headers['content-type']) !== 'application/json') {
      done(badRequest('a transaction body must be application/json'), undefined);
    } else if (!isUtf8(body)) done(badRequest('a transaction body must be valid UTF-8'), undefined);
    else done(null, body.toString('utf8'));
  });
  // An NDJSON body is an import: handed over unread, streamed by the import route.
  app.addContentTypeParser(IMPORT_MEDIA_TYPES, (_request, payload, done) => done(null, payload));

  app.post(
    '/api/v1/:bucket',
    {
      // The body's one check is parseOperation, on the raw text; the schema documents it (txn-operations.ts).
      schema: transactionSchema,
      bodyLimit,
      preParsing: async (request: OpenedRequest, _reply, payload) => openBeforeBody(ctx, request, payload),
    },
    async (request: OpenedRequest, reply) => {
      if (isImportRequest(request)) return importRoute(ctx, request, reply, request.body as Readable);
      if (isRollbackRequest(request)) return rollbackRoute(ctx, request, reply);
      return runTransaction(ctx, jsonLimits, request, reply);
    },
  );
}

/**
 * Before a byte of the body is read: an unknown bucket, a wrong credential, or a caller that may
 * do no transaction operation at all is refused without reading (let alone parsing) it. Checks
 * need read (a transaction of checks only is legal), writes need write or delete, so only a
 * caller with none of read, write and delete is refused here; each operation's own permission on
 * its key is checked after parsing.
 */
async function openBeforeBody({ buckets }: ServerContext, request: OpenedRequest, payload: Readable): Promise<Readable> {
  const target = await openBucket(buckets, bucketIdOf(request), request);
  const { bucket, principal } = target;
  request[opened] = target;
  if (allows(principal, 'write', bucket.flags) || allows(principal, 'delete', bucket.flags)) return payload;
  authorize(bucket, principal, 'read');
  // Only checks are possible: the body is bounded to what 1,000 checks need.
  if (Number(request.headers['content-length']) > CHECKS_BODY_LIMIT) throw checksOnlyTooLarge();
  return bounded(payload, CHECKS_BODY_LIMIT);
}

/** Parses the body, checks every operation and its permission, and commits them as one revision. */
async function runTransaction(ctx: ServerContext, jsonLimits: JsonLimits, request: OpenedRequest, reply: FastifyReply) {
  const { store, buckets, clock, config } = ctx;
  const { bucket, principal } = request[opened] ?? (await openBucket(buckets, bucketIdOf(request), request));
  const items = txnItems(typeof request.body === 'string' ? request.body : '', jsonLimits, config.maxValueBytes);
  const now = clock();
  const ops = items.map((node, i) => parseOperation(node, `txn[${i}]`, bucket.record.defaultTtl, now, config.maxValueBytes));
  // Before any work: prefix deletes that repeat or overlap would list the same keys again.
  checkPrefixDeletes(ops);
  for (const op of ops) authorize(bucket, principal, PERMISSION[op.op], op.key);
  const outcome = await store.write(bucket.record.id, { op: 'commit', ops, now, actor: actorOf(principal, request) });
  if ('refused' in outcome) {
    if (outcome.refused === 'no_bucket') throw new KvbError('not_found', 'no such bucket');
    if (outcome.refused === 'moved') throw new KvbError('conflict', 'the bucket changed meanwhile');
    throw new KvbError('conflict', `checks failed: txn[${outcome.failed.join('], txn[')}]`, {
      'kvb-failed-checks': outcome.failed.join(','),
    });
  }
  reply.header('kvb-revision', String(outcome.revision));
  if (!outcome.results) return reply.code(204).send();
  return reply.code(200).type('application/json').send(resultsBody(outcome.revision, outcome.results));
}

/** The operations' nodes of a `{"txn":[…]}` body, or the 400 its shape earns. */
export function txnItems(body: string, jsonLimits: JsonLimits, maxValueBytes: number): JsonNode[] {
  let root: JsonNode;
  try {
    root = parseJsonSource(body, jsonLimits);
  } catch (err) {
    // The scan's bound is in characters (base64 included): the refusal names the value limit.
    if (err instanceof JsonLimitError && err.valueTooLarge) {
      throw badRequest(`${err.valueTooLarge.what} at offset ${err.valueTooLarge.offset}: ${valueTooLarge(undefined, maxValueBytes)}`);
    }
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
  return list.items;
}
