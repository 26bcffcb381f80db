/**
 * The pieces route schemas share (error answers, credentials, parameters, headers, value bodies).
 * Route schemas (key-schemas.ts, bucket-schemas.ts, list-schema.ts, transaction-schema.ts, …) validate path parameters, query strings and bodies, and @fastify/swagger
 * turns the same objects into the OpenAPI document, so the docs cannot drift from what is enforced.
 *
 * Validated schemas use only JSON Schema keywords (`examples`, never `example`): Ajv is strict.
 * Bodies that the routes read raw (a key's value, a counter delta, a transaction) have no JSON schema
 * to validate them; they are described by `rawBody`, which only the OpenAPI document sees (api-docs.ts).
 */

import { ERRORS, type ErrorMessage, envelope } from '../../errors.js';
import { MAX_KEY_BYTES, MAX_TTL_SECONDS, VALUE_TYPES } from '../../limits.js';

export const ERROR_SCHEMA_ID = 'ErrorEnvelope';

export const errorEnvelopeSchema = {
  $id: ERROR_SCHEMA_ID,
  type: 'object',
  description:
    'Every error body. `code` is the HTTP status, `message` its kind; `detail` is the reason in words, the same text as the Kvb-Error-Detail header.',
  properties: {
    error: {
      type: 'object',
      properties: {
        code: { type: 'integer', description: 'the HTTP status', examples: [404] },
        message: { type: 'string', enum: Object.keys(ERRORS), examples: ['not_found'] },
        detail: { type: 'string', maxLength: 300, description: 'why, in words (never a secret)', examples: ['no such key'] },
      },
      required: ['code', 'message', 'detail'],
    },
  },
  required: ['error'],
  examples: [envelope('not_found', 'no such key')],
} as const;

/** An error response: the shared envelope, with an example carrying this status's message and a typical detail. */
export function errorResponse(kind: ErrorMessage, description: string, detail: string) {
  const headers: Record<string, object> = {
    'Kvb-Error-Detail': { type: 'string', description: 'why, in words (printable ASCII)', example: detail },
  };
  if (kind === 'unauthorized') headers['WWW-Authenticate'] = { type: 'string', example: 'Bearer realm="kvb"' };
  if (kind === 'too_many_requests') headers['Retry-After'] = { type: 'integer', description: 'seconds to wait', example: 30 };
  return {
    description,
    headers,
    content: { 'application/json': { schema: { $ref: `${ERROR_SCHEMA_ID}#` }, example: envelope(kind, detail) } },
  };
}

/** A response without a body (204, and every HEAD answer). */
export const noBody = (description: string, headers?: object) => ({ description, type: 'null', ...(headers ? { headers } : {}) });

export const badRequest = errorResponse(
  'bad_request',
  'Malformed input (see Kvb-Error-Detail)',
  `key is longer than ${MAX_KEY_BYTES} bytes`,
);
export const unauthorized = errorResponse(
  'unauthorized',
  'A credential is needed, or the one presented is not valid',
  'credential is not valid for this bucket',
);
export const forbidden = errorResponse('forbidden', 'The credential does not allow this', 'credential does not allow write');
export const unavailable = errorResponse('service_unavailable', 'Storage unreachable', 'storage is unavailable');
export const noBucket = errorResponse('not_found', 'No such bucket', 'no such bucket');
export const tooMany = errorResponse(
  'too_many_requests',
  'Over --rate-limit or --bucket-creation-rate, or too many unverified credentials at once',
  'rate limit exceeded; retry in 30 s',
);
export const storageFull = errorResponse(
  'insufficient_storage',
  'A write the storage cannot take (full or read-only), or --max-buckets reached',
  'the disk holding the database is full',
);

/** The errors every bucket operation can answer; 404 is per operation. */
export const bucketErrors = {
  400: badRequest,
  401: unauthorized,
  403: forbidden,
  404: noBucket,
  429: tooMany,
  503: unavailable,
  507: storageFull,
};
export const keyErrors = {
  ...bucketErrors,
  404: errorResponse('not_found', 'No such bucket, or the key is absent or expired', 'no such key'),
};

/**
 * Credentials: Bearer, Basic (the username is the credential), `access_token` or `key` query.
 * `{}` marks operations that anonymous callers may perform when the bucket allows it.
 */
type Security = Array<Record<string, string[]>>;
export const adminCredential: Security = [{ bearer: [] }, { basic: [] }, { accessToken: [] }, { keyQuery: [] }];
export const anyCredential: Security = [...adminCredential, {}];
/** Bucket creation is anonymous, unless the operator set a bucket-creation key (sent as Bearer). */
export const creationCredential: Security = [{}, { bearer: [] }];

export const securitySchemes = {
  bearer: {
    type: 'http',
    scheme: 'bearer',
    description:
      '`Authorization: Bearer <credential>`: a bucket secret_key (admin), read_key, write_key, or a temporary token. ' +
      'Also the operator key for bucket creation when the server requires one.',
  },
  basic: {
    type: 'http',
    scheme: 'basic',
    description: '`Authorization: Basic`: the username is the credential; the password is ignored (leave it empty).',
  },
  accessToken: { type: 'apiKey', in: 'query', name: 'access_token', description: 'the credential as `?access_token=`' },
  keyQuery: { type: 'apiKey', in: 'query', name: 'key', description: 'the credential as `?key=`' },
} as const;

export const bucketParam = {
  type: 'string',
  description: 'the bucket id, as returned when the bucket was created',
};
export const bucketParams = { type: 'object', properties: { bucket: bucketParam }, required: ['bucket'] };
export const keyParams = {
  type: 'object',
  properties: {
    bucket: bucketParam,
    // Fastify's wildcard: app.ts shows it as {key}.
    '*': {
      type: 'string',
      description:
        `the key, 1 to ${MAX_KEY_BYTES} bytes of UTF-8. It is sent percent-encoded as one path segment, so \`user/42\` travels as \`user%2F42\` ` +
        '(the explorer encodes it for you; with curl, encode it yourself).',
      examples: ['user/42'],
    },
  },
  required: ['bucket'],
};
export const ttlQuery = {
  type: 'object',
  properties: {
    ttl: {
      type: 'string',
      pattern: '^[0-9]+$',
      description: `seconds until expiry, 0 to ${MAX_TTL_SECONDS}; 0 = never (default: the bucket default_ttl)`,
    },
  },
};

export const REVISION_HEADERS = {
  ETag: { type: 'string', description: 'the key\'s revision as a strong entity tag, e.g. `"42"`', example: '"42"' },
  'Kvb-Revision': { type: 'string', description: "the bucket revision of the key's last change", example: '42' },
};
export const commitRevision = {
  'Kvb-Revision': { type: 'string', description: 'the bucket revision this change committed as', example: '43' },
};
export const bucketRevision = {
  'Kvb-Revision': { type: 'string', description: 'the bucket revision read at (every change up to it is visible)', example: '42' },
};

/** The policy GET's usage headers (admin only): what the bucket stores, and its quotas when the server sets them. */
export const bucketUsage = {
  'Kvb-Usage-Keys': {
    type: 'string',
    description: 'keys the bucket stores (expired ones until the sweeper removes them)',
    example: '1200',
  },
  'Kvb-Usage-Bytes': { type: 'string', description: 'bytes the bucket stores: the length of every key and value', example: '53211' },
  'Kvb-Quota-Keys': { type: 'string', description: "the server's --max-keys-per-bucket, when set", example: '100000' },
  'Kvb-Quota-Bytes': { type: 'string', description: "the server's --max-bytes-per-bucket, when set", example: '104857600' },
};

/** Request headers of a conditional write (RFC 9110 section 13). Validated by the route, described here. */
export const writeConditions = {
  type: 'object',
  properties: {
    'if-match': {
      type: 'string',
      description:
        'write only if the key is live at one of these revisions (`"42"`, a list `"41", "42"`), or live at all (`*`). ' +
        'Strong comparison: a weak tag `W/"42"` never matches. Otherwise 412 with the current ETag.',
    },
    'if-none-match': {
      type: 'string',
      description: '`*`: write only if the key is absent or expired (create-only). A list: only if the key is at none of them.',
    },
  },
};
export const readConditions = {
  type: 'object',
  properties: {
    'if-none-match': {
      type: 'string',
      description: 'answer 304 (no body) when the live revision is listed (weak comparison), or any with `*`',
    },
    'if-match': { type: 'string', description: 'answer 412 unless the key is live at a listed revision' },
    'kvb-include': {
      type: 'string',
      description: "`create-revision`: answer the key's create revision (a fencing token) in Kvb-Create-Revision; anything else is 400",
    },
  },
};
export const preconditionFailed = {
  ...errorResponse(
    'precondition_failed',
    'The If-Match / If-None-Match condition does not hold; nothing was written',
    'the key is at revision 42',
  ),
};
preconditionFailed.headers = {
  ...preconditionFailed.headers,
  ETag: { type: 'string', description: 'the current revision, when the key is live', example: '"42"' },
};
export const notModified = noBody('Not modified: the live revision is one the client listed in If-None-Match', {
  ETag: REVISION_HEADERS.ETag,
});

export const valueHeaders = {
  ...REVISION_HEADERS,
  'Kvb-Type': { type: 'string', enum: [...VALUE_TYPES], description: 'the stored type' },
  'Kvb-Expires-At': {
    type: 'string',
    format: 'date-time',
    description: 'when the key expires (RFC 3339 UTC); absent when it never does',
  },
  'Kvb-Create-Revision': {
    type: 'integer',
    description:
      'GET and HEAD with `Kvb-Include: create-revision` only: the revision at which the key last became live from absent or expired ' +
      '(a write over a live value keeps it): a lock\'s fencing token, checked by `{"check":K,"created":N}` in a transaction',
  },
};
export const typedValue = {
  description:
    'The stored value, with the Content-Type of its type: application/json (json), text/plain; charset=utf-8 (text, int64, float64), ' +
    'application/octet-stream (bytes)',
  headers: valueHeaders,
  content: {
    'text/plain': { schema: { type: 'string' }, example: 'hello' },
    'application/json': { schema: {}, example: { a: 1 } },
    'application/octet-stream': { schema: { type: 'string', format: 'binary' } },
  },
};
export const valueBody = {
  content: {
    'text/plain': { schema: { type: 'string', description: 'stored as UTF-8 text', examples: ['hello'] } },
    'application/json': { schema: { description: 'stored as JSON, exactly as sent', examples: [{ a: 1 }] } },
    'application/octet-stream': { schema: { type: 'string', format: 'binary', description: 'stored as raw bytes' } },
  },
};

/** The OpenAPI tag of the key operations (also used by the bucket routes that act on keys). */
export const KEY = 'keys';
