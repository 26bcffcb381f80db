/**
 * Route schemas. They validate query strings and PATCH bodies, and @fastify/swagger turns the
 * same objects into the OpenAPI document, so the docs cannot drift from what is enforced.
 */

export const ERROR_SCHEMA_ID = 'ErrorEnvelope';

export const errorEnvelopeSchema = {
  $id: ERROR_SCHEMA_ID,
  type: 'object',
  description: 'Every error body. The human-readable reason is in the Kvb-Error-Detail header.',
  properties: {
    error: {
      type: 'object',
      properties: {
        code: { type: 'integer', description: 'the HTTP status', example: 404 },
        message: {
          type: 'string',
          enum: [
            'bad_request',
            'unauthorized',
            'forbidden',
            'not_found',
            'method_not_allowed',
            'not_acceptable',
            'internal_error',
            'service_unavailable',
          ],
          example: 'not_found',
        },
      },
      required: ['code', 'message'],
    },
  },
  required: ['error'],
} as const;

const errorRef = (description: string) => ({ description, $ref: `${ERROR_SCHEMA_ID}#` });

const errors = {
  400: errorRef('Malformed input'),
  401: errorRef('A credential is needed, or the one presented is not valid'),
  403: errorRef('The credential does not allow this'),
  404: errorRef('No such bucket or key'),
};

/** Any credential: Bearer, Basic (username), `access_token` or `key` query; `{}` = anonymous where allowed. */
type Security = Array<Record<string, string[]>>;
const adminCredential: Security = [{ bearer: [] }, { basic: [] }, { accessToken: [] }, { keyQuery: [] }];
const anyCredential: Security = [...adminCredential, {}];

const bucketParams = {
  type: 'object',
  properties: { bucket: { type: 'string', description: 'bucket id' } },
  required: ['bucket'],
};
const keyParams = {
  type: 'object',
  properties: {
    bucket: { type: 'string', description: 'bucket id' },
    '*': { type: 'string', description: 'percent-encoded key, at most 128 bytes decoded; may contain %2F' },
  },
  required: ['bucket'],
};
const ttlQuery = {
  type: 'object',
  properties: {
    ttl: { type: 'string', pattern: '^[0-9]+$', description: 'seconds; 0 = no expiry (default: the bucket default_ttl)' },
  },
};
const typedValue = {
  description: 'The stored value with its Content-Type; Kvb-Type names the type, Kvb-Expires-At the expiry',
  headers: {
    'Kvb-Type': { type: 'string', enum: ['json', 'text', 'int64', 'float64', 'bytes'] },
    'Kvb-Expires-At': { type: 'string', format: 'date-time' },
  },
  content: {
    'application/json': { schema: {} },
    'text/plain': { schema: { type: 'string' } },
    'application/octet-stream': { schema: { type: 'string', format: 'binary' } },
  },
};

export const keySchemas = {
  get: {
    tags: ['keys'],
    summary: 'Read a key',
    params: keyParams,
    security: anyCredential,
    response: { 200: typedValue, ...errors },
  },
  head: {
    tags: ['keys'],
    summary: 'Check a key exists (same headers as GET, no body)',
    params: keyParams,
    security: anyCredential,
    response: { 200: { description: 'The key is live' }, 404: { description: 'Absent or expired' } },
  },
  set: {
    tags: ['keys'],
    summary: 'Set a key',
    description:
      'The body is the value (at most 16 KiB). Type: application/json -> JSON, text/plain -> text, ' +
      'application/octet-stream -> bytes; otherwise a number -> Int64/Float64, valid JSON -> JSON, else bytes.',
    params: keyParams,
    querystring: ttlQuery,
    security: anyCredential,
    consumes: ['application/json', 'text/plain', 'application/octet-stream'],
    response: { 200: typedValue, ...errors },
  },
  delete: {
    tags: ['keys'],
    summary: 'Delete a key',
    params: keyParams,
    security: anyCredential,
    response: { 204: { description: 'Deleted' }, ...errors },
  },
  counter: {
    tags: ['keys'],
    summary: 'Add a signed delta to a numeric key (created from the delta when absent)',
    description: 'Body: `+N` or `-N`, N a decimal integer or float. Answers the new value as text.',
    params: keyParams,
    querystring: ttlQuery,
    security: anyCredential,
    consumes: ['text/plain'],
    response: {
      200: { description: 'The new value', content: { 'text/plain': { schema: { type: 'string', example: '42' } } } },
      ...errors,
    },
  },
};

export const bucketSchemas = {
  create: {
    tags: ['buckets'],
    summary: 'Create a bucket',
    consumes: ['application/x-www-form-urlencoded'],
    body: {
      type: 'object',
      properties: {
        email: { type: 'string', description: 'required; an admin label' },
        secret_key: { type: 'string', description: 'admin credential' },
        read_key: { type: 'string', description: 'read and list credential' },
        write_key: { type: 'string', description: 'write credential' },
        signing_key: { type: 'string', description: 'signs temporary tokens' },
        default_ttl: { type: 'string', pattern: '^[0-9]*$', description: 'seconds; 0 = no expiry; default 604800' },
      },
      required: ['email'],
    },
    response: {
      201: {
        description: 'The new bucket id (also in Location)',
        content: { 'text/plain': { schema: { type: 'string', example: '8d0f5f3e-0c55-4d5a-9a53-2f8a1f3c7b21' } } },
      },
      400: errors[400],
      401: errorRef('Bucket creation needs the operator key'),
    },
  },
  policy: {
    tags: ['buckets'],
    summary: 'Read the bucket policy',
    params: bucketParams,
    security: adminCredential,
    response: {
      200: {
        description: 'The policy projection (no secrets)',
        type: 'object',
        properties: {
          default_ttl: { type: 'integer' },
          has_secret_key: { type: 'boolean' },
          has_read_key: { type: 'boolean' },
          has_write_key: { type: 'boolean' },
          has_signing_key: { type: 'boolean' },
          signing_key_generation: { type: 'integer' },
          anonymous_access: {
            type: 'object',
            properties: {
              read: { type: 'boolean' },
              write: { type: 'boolean' },
              enumerate: { type: 'boolean' },
              delete: { type: 'boolean' },
            },
          },
        },
      },
      ...errors,
    },
  },
  head: {
    tags: ['buckets'],
    summary: 'Check the bucket exists and the credential is admin',
    params: bucketParams,
    security: adminCredential,
    response: { 200: { description: 'Exists, admin access' }, 404: { description: 'Absent or no admin access' } },
  },
  update: {
    tags: ['buckets'],
    summary: 'Update the bucket policy',
    description: 'Absent fields are unchanged; null clears (not secret_key); a string or number sets or rotates.',
    params: bucketParams,
    security: adminCredential,
    consumes: ['application/json'],
    body: {
      type: 'object',
      additionalProperties: false,
      properties: {
        secret_key: { type: ['string', 'number'] },
        read_key: { type: ['string', 'number', 'null'] },
        write_key: { type: ['string', 'number', 'null'] },
        signing_key: { type: ['string', 'number', 'null'] },
        default_ttl: { type: ['integer', 'null'] },
      },
    },
    response: { 204: { description: 'Updated' }, ...errors },
  },
  delete: {
    tags: ['buckets'],
    summary: 'Delete the bucket and all its keys',
    params: bucketParams,
    security: adminCredential,
    response: { 204: { description: 'Deleted' }, ...errors },
  },
  transaction: {
    tags: ['keys'],
    summary: 'Commit several set and delete operations atomically',
    params: bucketParams,
    security: anyCredential,
    consumes: ['application/json'],
    body: {
      type: 'object',
      properties: {
        txn: {
          type: 'array',
          minItems: 1,
          maxItems: 1000,
          items: {
            oneOf: [
              {
                type: 'object',
                properties: { set: { type: 'string' }, value: {}, ttl: { type: 'integer', minimum: 0 } },
                required: ['set', 'value'],
              },
              { type: 'object', properties: { delete: { type: 'string' } }, required: ['delete'] },
            ],
          },
        },
      },
      required: ['txn'],
      example: { txn: [{ set: 'a', value: 1 }, { set: 'b', value: 'text', ttl: 60 }, { delete: 'c' }] },
    },
    response: { 204: { description: 'All operations committed' }, ...errors },
  },
  list: {
    tags: ['keys'],
    summary: 'List keys',
    params: bucketParams,
    security: anyCredential,
    querystring: {
      type: 'object',
      properties: {
        prefix: { type: 'string' },
        limit: { type: 'string', pattern: '^[0-9]+$', description: 'default 10000' },
        skip: { type: 'string', pattern: '^[0-9]+$', description: 'default 0' },
        reverse: { type: 'string', enum: ['', 'true', 'false', '1', '0'] },
        values: { type: 'string', enum: ['', 'true', 'false', '1', '0'] },
        format: { type: 'string', description: 'text (default), json or jsonl; wins over Accept' },
      },
    },
    produces: ['text/plain', 'application/json', 'application/x-ndjson'],
    response: {
      200: {
        description: 'The keys (with values when values=true)',
        content: {
          'text/plain': { schema: { type: 'string', example: 'a\nb\n' } },
          'application/json': { schema: { type: 'array', example: ['a', 'b'] } },
          'application/x-ndjson': { schema: { type: 'string', example: '"a"\n"b"\n' } },
        },
      },
      ...errors,
      406: errorRef('Unknown format, or an Accept header that rules out every list format'),
    },
  },
  mint: {
    tags: ['tokens'],
    summary: 'Mint a temporary token limited to a prefix and permissions',
    params: bucketParams,
    security: adminCredential,
    consumes: ['application/x-www-form-urlencoded'],
    body: {
      type: 'object',
      properties: {
        prefix: { type: 'string', description: 'non-empty key prefix' },
        permissions: {
          anyOf: [{ type: 'string' }, { type: 'array', items: { type: 'string' } }],
          description: 'comma-separated (or repeated): read, write, enumerate, delete',
        },
        ttl: { type: 'string', pattern: '^[0-9]+$', description: 'seconds, > 0' },
      },
      required: ['prefix', 'permissions', 'ttl'],
    },
    response: {
      200: {
        description: 'The token',
        type: 'object',
        properties: { access_token: { type: 'string' } },
      },
      ...errors,
      503: errorRef('The bucket has no signing_key'),
    },
  },
};
