/** Schemas of the key routes (key-routes.ts); shared pieces in schema-parts.ts. */
import { HISTORY_PAGE_DEFAULT, HISTORY_PAGE_MAX, MAX_VALUE_BYTES } from '../../limits.js';
import {
  anyCredential,
  commitRevision,
  KEY,
  keyErrors,
  keyParams,
  noBody,
  noBucket,
  notModified,
  preconditionFailed,
  readConditions,
  REVISION_HEADERS,
  ttlQuery,
  typedValue,
  valueBody,
  valueHeaders,
  writeConditions,
} from './schema-parts.js';

const setKey = {
  tags: [KEY],
  operationId: 'setKey',
  summary: 'Set a key',
  description:
    `The body is the value, at most ${MAX_VALUE_BYTES} bytes. ` +
    'Its type comes from the Content-Type: `application/json` stores JSON, `text/plain` UTF-8 text, ' +
    '`application/octet-stream` raw bytes. Without one of those, a body that is a number is stored as Int64 or Float64, ' +
    'valid JSON as JSON, anything else as bytes. Answers the stored value, as GET would.',
  params: keyParams,
  querystring: ttlQuery,
  security: anyCredential,
  rawBody: valueBody,
  headers: writeConditions,
  response: { 200: typedValue, ...keyErrors, 404: noBucket, 412: preconditionFailed },
};

export const keySchemas = {
  get: {
    tags: [KEY],
    operationId: 'getKey',
    summary: 'Read a key',
    description:
      'History (extensions): `?rev=N` answers the key as it was at revision N (404 if absent then, 410 `gone` below the ' +
      "bucket's history floor, named in Kvb-History-Floor; 400 beyond its revision). `?history=true` answers the key's recorded " +
      'changes as JSONL, newest first: `{"rev","operation","time","type","size","expires_at","actor"}` (operation: set, delete, expire, ' +
      'counter, transaction, import or rollback; actor: `{"kind","token_id","address"}` of the credential that made it, null before ' +
      `kvb recorded it), with \`"value"\` when \`values=true\`; \`limit\` (default ${HISTORY_PAGE_DEFAULT}, at most ${HISTORY_PAGE_MAX}) and ` +
      "`cursor` (from Kvb-Next-Cursor) page it; `actor=KIND` or `actor=token:ID` (secret key only) keeps one actor's changes. HEAD takes `rev` too.",
    params: keyParams,
    headers: readConditions,
    security: anyCredential,
    response: { 200: typedValue, 304: notModified, ...keyErrors, 412: preconditionFailed },
  },
  head: {
    tags: [KEY],
    operationId: 'checkKey',
    summary: 'Check a key exists (same headers as GET, no body)',
    params: keyParams,
    security: anyCredential,
    headers: readConditions,
    response: {
      200: noBody('The key is live', valueHeaders),
      304: notModified,
      404: noBody('No such bucket, or the key is absent or expired'),
      412: noBody('If-Match does not hold'),
    },
  },
  set: setKey,
  put: { ...setKey, operationId: 'setKeyPut', summary: 'Set a key (PUT, an alias of POST)' },
  delete: {
    tags: [KEY],
    operationId: 'deleteKey',
    summary: 'Delete a key',
    params: keyParams,
    security: anyCredential,
    headers: writeConditions,
    response: { 204: noBody('Deleted', commitRevision), ...keyErrors, 412: preconditionFailed },
  },
  counter: {
    tags: [KEY],
    operationId: 'addToCounter',
    summary: 'Add a signed delta to a numeric key (created from the delta when absent)',
    description:
      'Int64 + integer delta stays Int64 (overflow is 400); any float makes Float64 (NaN or infinity is 400). ' +
      'A missing key starts from the delta with the bucket default TTL; an existing key keeps its expiry unless `ttl` is given.',
    params: keyParams,
    querystring: ttlQuery,
    headers: writeConditions,
    security: anyCredential,
    rawBody: {
      content: {
        'text/plain': {
          schema: {
            type: 'string',
            pattern: '^[+-](0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?$',
            description: 'the delta: `+N` or `-N`, N a decimal integer or float',
            examples: ['+1'],
          },
        },
      },
    },
    response: {
      200: {
        description: 'The new value',
        headers: { ...REVISION_HEADERS, 'Kvb-Type': valueHeaders['Kvb-Type'], 'Kvb-Expires-At': valueHeaders['Kvb-Expires-At'] },
        content: { 'text/plain': { schema: { type: 'string' }, example: '42' } },
      },
      ...keyErrors,
      404: noBucket,
      412: preconditionFailed,
    },
  },
};
