/**
 * Schemas of the bucket routes (creation, policy, update, delete) and of minting a token; the
 * listing's is in list-schema.ts, the transaction's in transaction-schema.ts, shared pieces in schema-parts.ts.
 */
import {
  adminCredential,
  badRequest,
  bucketErrors,
  bucketParams,
  bucketRevision,
  bucketUsage,
  creationCredential,
  errorResponse,
  noBody,
  storageFull,
  tooMany,
  unavailable,
} from './schema-parts.js';
import { DEFAULT_BUCKET_TTL_SECONDS, MAX_KEY_BYTES, MAX_TTL_SECONDS, PERMISSIONS } from '../../limits.js';

const BUCKETS = 'buckets';
const credentialPatch = (description: string, nullable: boolean) => ({
  type: nullable ? ['string', 'number', 'null'] : ['string', 'number'],
  description,
});

const policyResponse = {
  description: 'The policy projection (never any secret)',
  type: 'object',
  properties: {
    default_ttl: { type: 'integer', description: 'seconds; 0 = no expiry' },
    has_secret_key: { type: 'boolean' },
    has_read_key: { type: 'boolean' },
    has_write_key: { type: 'boolean' },
    has_signing_key: { type: 'boolean' },
    signing_key_generation: { type: 'integer', description: 'goes up by one each time the signing key changes' },
    anonymous_access: {
      type: 'object',
      description: 'what a caller without a credential may do',
      properties: {
        read: { type: 'boolean' },
        write: { type: 'boolean' },
        enumerate: { type: 'boolean' },
        delete: { type: 'boolean' },
      },
    },
  },
  examples: [
    {
      default_ttl: DEFAULT_BUCKET_TTL_SECONDS,
      has_secret_key: true,
      has_read_key: false,
      has_write_key: false,
      has_signing_key: true,
      signing_key_generation: 0,
      anonymous_access: { read: true, write: true, enumerate: true, delete: true },
    },
  ],
};

const deleteBucket = {
  tags: [BUCKETS],
  operationId: 'deleteBucket',
  summary: 'Delete the bucket and all its keys',
  params: bucketParams,
  security: adminCredential,
  response: { 204: noBody('Deleted'), ...bucketErrors },
};

export const bucketSchemas = {
  create: {
    tags: [BUCKETS],
    operationId: 'createBucket',
    summary: 'Create a bucket',
    description:
      'Answers the new bucket id as text. Keep the secret_key: it is the admin credential (use it in Authorize). ' +
      'A signing_key is needed to mint temporary tokens. Empty optional fields count as absent.',
    consumes: ['application/x-www-form-urlencoded'],
    security: creationCredential,
    body: {
      type: 'object',
      properties: {
        email: { type: 'string', description: 'required; an admin label (1 to 254 characters with an @)', examples: ['me@example.com'] },
        // Empty examples: the explorer then pre-fills nothing, rather than a well-known "string" credential.
        secret_key: { type: 'string', description: 'admin credential', examples: [''] },
        read_key: { type: 'string', description: 'read and list credential', examples: [''] },
        write_key: { type: 'string', description: 'write credential', examples: [''] },
        signing_key: { type: 'string', description: 'signs temporary tokens', examples: [''] },
        default_ttl: {
          type: 'string',
          pattern: '^[0-9]*$',
          description: `seconds; 0 = no expiry; default ${DEFAULT_BUCKET_TTL_SECONDS}`,
          examples: [''],
        },
      },
      required: ['email'],
    },
    response: {
      201: {
        description: 'The new bucket id (also in Location)',
        headers: { Location: { type: 'string', example: '/api/v1/8d0f5f3e-0c55-4d5a-9a53-2f8a1f3c7b21' } },
        content: { 'text/plain': { schema: { type: 'string' }, example: '8d0f5f3e-0c55-4d5a-9a53-2f8a1f3c7b21' } },
      },
      400: badRequest,
      401: errorResponse(
        'unauthorized',
        'This server requires its operator key (Bearer) to create buckets',
        'creating a bucket needs the operator bucket-creation key',
      ),
      429: tooMany,
      503: unavailable,
      507: storageFull,
    },
  },
  policy: {
    tags: [BUCKETS],
    operationId: 'getBucketPolicy',
    summary: 'Read the bucket policy',
    params: bucketParams,
    security: adminCredential,
    response: { 200: { ...policyResponse, headers: { ...bucketRevision, ...bucketUsage } }, ...bucketErrors },
  },
  head: {
    tags: [BUCKETS],
    operationId: 'checkBucket',
    summary: 'Check the bucket exists and the credential is admin',
    params: bucketParams,
    security: adminCredential,
    response: {
      200: noBody('Exists, and the credential has admin access'),
      404: noBody('No such bucket, or no admin access (both look the same)'),
    },
  },
  update: {
    tags: [BUCKETS],
    operationId: 'updateBucket',
    summary: 'Update the bucket policy',
    description:
      'Absent fields are unchanged; `null` clears (not secret_key); a string or number sets or rotates. ' +
      'Any other field is 400. Changing the signing key invalidates every earlier token.',
    params: bucketParams,
    security: adminCredential,
    consumes: ['application/json'],
    body: {
      type: 'object',
      additionalProperties: false,
      properties: {
        secret_key: credentialPatch('admin credential; cannot be cleared', false),
        read_key: credentialPatch('read and list credential', true),
        write_key: credentialPatch('write credential', true),
        signing_key: credentialPatch('signs temporary tokens', true),
        default_ttl: { type: ['integer', 'null'], description: 'seconds; 0 or null = no expiry' },
      },
      examples: [{ read_key: 'R', default_ttl: 3600 }],
    },
    response: { 204: noBody('Updated'), ...bucketErrors },
  },
  delete: deleteBucket,
  deleteSlash: {
    ...deleteBucket,
    operationId: 'deleteBucketSlash',
    summary: 'Delete the bucket and all its keys (same as DELETE /api/v1/{bucket})',
  },
  mint: {
    tags: ['tokens'],
    operationId: 'mintToken',
    summary: 'Mint a temporary token limited to a key prefix and permissions',
    description:
      'The token is a JWT (HS256, signed with the bucket signing_key). Use it as a Bearer credential. ' +
      'Changing or clearing the signing key invalidates it.',
    params: bucketParams,
    security: adminCredential,
    consumes: ['application/x-www-form-urlencoded'],
    body: {
      type: 'object',
      properties: {
        prefix: { type: 'string', description: `non-empty key prefix (1 to ${MAX_KEY_BYTES} bytes)`, examples: ['user/'] },
        permissions: {
          anyOf: [{ type: 'string' }, { type: 'array', items: { type: 'string' } }],
          description: `comma-separated (or repeated) from ${PERMISSIONS.join(', ')}`,
          examples: ['read,enumerate'],
        },
        ttl: { type: 'string', pattern: '^[0-9]+$', description: `lifetime in seconds, 1 to ${MAX_TTL_SECONDS}`, examples: ['600'] },
      },
      required: ['prefix', 'permissions', 'ttl'],
    },
    response: {
      200: {
        description: 'The token',
        type: 'object',
        properties: {
          access_token: { type: 'string', description: 'a JWT' },
          id: {
            type: 'string',
            description:
              "extension: the token's id (its jti claim), which history records for its changes (`actor.token_id`); it does not reveal the token",
          },
        },
        examples: [{ access_token: 'eyJhbGciOiJIUzI1NiJ9.eyJia3QiOiI4ZDBmIn0.c2lnbmF0dXJl', id: 'Xq3v9LrT0aBc' }],
      },
      ...bucketErrors,
      503: errorResponse(
        'service_unavailable',
        'The bucket has no signing_key, or storage is unreachable',
        'the bucket has no signing_key',
      ),
    },
  },
};
