/** Schemas of the bucket routes (bucket, list, transaction, token routes); shared pieces in schema-parts.ts. */
import { secret, webhook } from './webhook-schemas.js';
import {
  adminCredential,
  anyCredential,
  badRequest,
  bucketErrors,
  bucketParams,
  bucketRevision,
  bucketUsage,
  commitRevision,
  creationCredential,
  errorResponse,
  KEY,
  keyErrors,
  noBody,
  noBucket,
  storageFull,
  tooMany,
  unavailable,
} from './schema-parts.js';
import {
  DEFAULT_BUCKET_TTL_SECONDS,
  DEFAULT_LIST_LIMIT,
  HISTORY_PAGE_DEFAULT,
  HISTORY_PAGE_MAX,
  MAX_FOLDER_ITEMS,
  MAX_KEY_BYTES,
  MAX_LIST_LIMIT,
  MAX_TTL_SECONDS,
  PERMISSIONS,
  VALUE_TYPES,
} from '../../limits.js';

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

const booleanQuery = (description: string) => ({
  type: 'string',
  enum: ['', 'true', 'false', '1', '0'],
  description: `${description}; true/false/1/0, a bare flag means true (default false)`,
});

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
  transaction: {
    tags: [KEY],
    operationId: 'commitTransaction',
    summary: 'Commit several set and delete operations atomically, optionally under checks; read several keys at one revision',
    description:
      'Every operation is checked (shape, key, value size, permission) before anything is written; then all commit, or none. ' +
      'A string value is stored as text, any other JSON value as JSON exactly as written; null is 400. ' +
      'Deleting an absent key is not an error. `{"check":K,"rev":N}` (K is live at revision N), `{"check":K,"exists":bool}` ' +
      'and (extension) `{"check":K,"created":N}` (K is live and its create revision, a fencing token, is N) ' +
      'are evaluated atomically with the writes and count toward the 1,000 operations; if any fails nothing is written and the ' +
      'answer is 409 with the failing indices in Kvb-Failed-Checks. A check needs read permission on its key. ' +
      'The whole transaction is one bucket revision. ' +
      'kvb extensions: `{"get":K}` reads K (read permission); `{"expire":K,"ttl":S}` gives the live key K a new expiry, S seconds ' +
      'from now (0: never), keeping its value (write permission; a key that is not live fails like a check); ' +
      '`{"delete_prefix":P}` deletes every live key starting with the non-empty prefix P (delete permission on P; the prefix deletes ' +
      "of one transaction at most 50,000 keys together, else 400; two that repeat or overlap, such as r/ and r/a: 400). These read the bucket as it was before the transaction's writes. A transaction with a get or " +
      'a delete_prefix answers 200 with `{"revision":N,"results":[…]}`, one result per operation: a get\'s key as ' +
      '`{"key","type","value","expires_at","rev"}` (int64 values as decimal strings, bytes as base64) or null when absent, ' +
      '`{"deleted":N}` for a delete_prefix, null for the rest. Gets and checks alone write nothing: N is the revision read at. ' +
      'History (extension): with no body, `?rollback=N[&prefix=P][&dry_run=true]` makes the bucket (or the keys under P) what it ' +
      'was at revision N as one new revision and answers JSON `{"rollback_to","prefix","dry_run","revision","changed","changes"}`; ' +
      'needs write and delete on the range (a dry run: read); N below the history floor is 410 `gone`. A POST with a body is a transaction whatever its query.',
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
                properties: {
                  set: { type: 'string', description: 'the key' },
                  value: { description: 'any JSON value but null' },
                  ttl: { type: 'integer', minimum: 0, description: 'seconds (default: the bucket default_ttl)' },
                },
                required: ['set', 'value'],
                additionalProperties: false,
              },
              {
                type: 'object',
                properties: { delete: { type: 'string', description: 'the key' } },
                required: ['delete'],
                additionalProperties: false,
              },
              {
                type: 'object',
                properties: { get: { type: 'string', description: 'the key to read' } },
                required: ['get'],
                additionalProperties: false,
              },
              {
                type: 'object',
                properties: {
                  expire: { type: 'string', description: 'the key (must be live)' },
                  ttl: { type: 'integer', minimum: 0, description: 'seconds from now; 0: never expires' },
                },
                required: ['expire', 'ttl'],
                additionalProperties: false,
              },
              {
                type: 'object',
                properties: { delete_prefix: { type: 'string', minLength: 1, description: 'delete every live key with this prefix' } },
                required: ['delete_prefix'],
                additionalProperties: false,
              },
              {
                type: 'object',
                properties: {
                  check: { type: 'string', description: 'the key' },
                  rev: { type: 'integer', minimum: 0, description: 'the key is live at this revision' },
                  exists: { type: 'boolean', description: 'the key is live (true) or absent/expired (false)' },
                  created: {
                    type: 'integer',
                    minimum: 0,
                    description:
                      'the key is live and was created (last became live from absent or expired) at this revision: a fencing token',
                  },
                },
                required: ['check'],
                additionalProperties: false,
              },
            ],
          },
        },
      },
      required: ['txn'],
      additionalProperties: false,
      examples: [{ txn: [{ set: 'a', value: 1 }, { set: 'b', value: 'text', ttl: 60 }, { delete: 'c' }] }],
    },
    response: {
      200: {
        description:
          'A transaction with a get or a delete_prefix: committed (or, with only gets and checks, read), with `revision` and `results`. ' +
          '(An import, an application/x-ndjson body, answers `{"imported","skipped","rev"}` here too; a rollback, ' +
          '`{"rollback_to","prefix","dry_run","revision","changed","changes"}`.)',
        headers: commitRevision,
        type: 'object',
        properties: {
          imported: { type: 'integer', description: 'an import: keys written' },
          skipped: { type: 'integer', description: 'an import: keys already expired' },
          rev: { type: 'integer', description: 'an import: the revision it committed as' },
          webhooks: {
            type: 'array',
            description: 'an import with webhook lines: each webhook added, with its new signing secret (shown only here)',
            items: { ...webhook, properties: { ...webhook.properties, secret } },
          },
          revision: { type: 'integer', description: 'the revision committed as, or read at' },
          rollback_to: { type: 'integer', description: 'a rollback: the revision the bucket (or prefix) was made equal to' },
          prefix: { type: 'string', description: 'a rollback: the prefix it covered' },
          dry_run: { type: 'boolean', description: 'a rollback: true when nothing was written' },
          changed: { type: 'integer', description: 'a rollback: how many keys it changes' },
          changes: {
            type: 'array',
            description: 'a rollback: each key it changes, in key order',
            items: {
              type: 'object',
              properties: {
                key: { type: 'string' },
                action: { type: 'string', enum: ['set', 'delete'] },
                from: {
                  anyOf: [
                    { type: 'null' },
                    { type: 'object', properties: { type: { type: 'string' }, size: { type: 'integer' }, rev: { type: 'integer' } } },
                  ],
                },
                to: { anyOf: [{ type: 'null' }, { type: 'object', properties: { type: { type: 'string' }, size: { type: 'integer' } } }] },
              },
            },
          },
          results: {
            type: 'array',
            items: {
              anyOf: [
                { type: 'null' },
                {
                  type: 'object',
                  description: 'a get: the key, its type, its value (int64 as a decimal string, bytes as base64), expiry and revision',
                  properties: {
                    key: { type: 'string' },
                    type: { type: 'string', enum: [...VALUE_TYPES] },
                    value: {},
                    expires_at: { type: ['string', 'null'], format: 'date-time' },
                    rev: { type: 'integer' },
                  },
                  required: ['key', 'type', 'value', 'expires_at', 'rev'],
                },
                { type: 'object', description: 'a delete_prefix', properties: { deleted: { type: 'integer' } }, required: ['deleted'] },
              ],
            },
          },
        },
        examples: [{ revision: 42, results: [{ key: 'a', type: 'int64', value: '7', expires_at: null, rev: 40 }, null, { deleted: 3 }] }],
      },
      204: noBody('All operations committed', commitRevision),
      ...keyErrors,
      404: noBucket,
      409: (() => {
        const conflict = errorResponse('conflict', 'A check failed; nothing was written', 'checks failed: txn[0]');
        conflict.headers = {
          ...conflict.headers,
          'Kvb-Failed-Checks': { type: 'string', description: 'indices (in txn) of the failing checks, comma-separated', example: '0,3' },
        };
        return conflict;
      })(),
    },
  },
  list: {
    tags: [KEY],
    operationId: 'listKeys',
    summary: 'List keys',
    description:
      'Keys in byte order of their UTF-8 (reverse=true flips it). The format comes from `format`, else from Accept, else text. ' +
      'Every line of text and jsonl ends with a newline. With values=true: `key=value` lines (text), `[key, value]` pairs (json, jsonl); ' +
      'bytes values are base64. A temporary token lists only within its prefix.',
    params: bucketParams,
    security: anyCredential,
    querystring: {
      type: 'object',
      properties: {
        prefix: { type: 'string', description: 'only keys starting with this' },
        limit: {
          type: 'string',
          pattern: '^[0-9]+$',
          description: `at most this many, 0 to ${MAX_LIST_LIMIT} (default ${DEFAULT_LIST_LIMIT})`,
        },
        skip: { type: 'string', pattern: '^[0-9]+$', description: 'skip this many first (default 0)' },
        reverse: booleanQuery('reverse byte order'),
        values: booleanQuery('include the values'),
        meta: booleanQuery(
          'format json or jsonl only (text: 400): each key as an object `{"key","type","size","expires_at","rev"}` ' +
            '(size in bytes, expires_at RFC 3339 or null, rev the key\'s revision), plus `"value"` with values=true ' +
            '(encoded as in the [key, value] pairs). Needs read permission, as values=true does',
        ),
        format: { type: 'string', description: '`text` (default), `json` or `jsonl`; wins over Accept; anything else is 406' },
        cursor: { type: 'string', description: 'continue after the page that answered this `Kvb-Next-Cursor` (same prefix and direction)' },
        rev: {
          type: 'string',
          pattern: '^[0-9]+$',
          description:
            "history: list (or with export=true, export) the bucket as it was at this revision; below the bucket's history floor 410 `gone`",
        },
        delimiter: {
          type: 'string',
          minLength: 1,
          description:
            'kvb extension, format json or jsonl only (text: 400; skip: 400): S3-style common prefixes. Lists the keys directly under ' +
            '`prefix` as `{"key":K}` (the meta object with meta=true or values=true) and, for deeper keys, each folder once as ' +
            '`{"prefix":F}` (F = the prefix up to and including the first delimiter after it), in key order, without reading the ' +
            `folders' contents (one index seek past each). \`limit\` counts items (at most ${MAX_FOLDER_ITEMS} per answer); Kvb-Next-Cursor continues.`,
          examples: ['/'],
        },
        export: booleanQuery('export every live key with its type, value and expiry as NDJSON (takes only `prefix`)'),
        watch: booleanQuery(
          'instead of a listing, a live change feed of the prefix: Server-Sent Events (Accept: text/event-stream) or JSONL ' +
            '(format=jsonl or Accept: application/x-ndjson); other formats 406; over --max-watchers 503 with Retry-After. ' +
            'Events: sync, set, delete, expire, progress (every 15 s), reset (then the stream ends), closed (credential no longer valid, bucket deleted, shutdown)',
        ),
        since: {
          type: 'string',
          description:
            'with watch: every retained change after this revision, then live (SSE Last-Event-ID does the same); older than the retained log: reset. ' +
            'With history=true: changes after this revision, or committed at or after this RFC 3339 time',
        },
        history: booleanQuery(
          "kvb extension, the secret key's only (other credentials 403): instead of a listing, the bucket's change log as JSONL, " +
            "every recorded change (or under `prefix`) in revision order and each revision's keys in byte order, one line per change " +
            '`{"rev","key","operation","time","type","size","expires_at","actor"}` (plus `"value"` with values=true); ' +
            `\`limit\` lines (default ${HISTORY_PAGE_DEFAULT}, at most ${HISTORY_PAGE_MAX}), continued by Kvb-Next-Cursor. ` +
            'Takes prefix, actor, since, until, limit, cursor, values and format=jsonl; rev, export, watch, delimiter, meta, reverse and skip are 400 beside it',
        ),
        actor: {
          type: 'string',
          description: "with history=true: only this actor's changes: secret, write, read, anonymous, token, server, or token:ID",
        },
        until: {
          type: 'string',
          description: 'with history=true: changes up to this revision, or committed at or before this RFC 3339 time',
        },
      },
    },
    response: {
      200: {
        description: 'The keys (with their values when values=true)',
        headers: bucketRevision,
        content: {
          'text/plain': { schema: { type: 'string' }, example: 'user/1\nuser/2\n' },
          'application/json': {
            schema: {
              type: 'array',
              items: {
                oneOf: [
                  { type: 'string', description: 'a key' },
                  { type: 'array', minItems: 2, maxItems: 2, items: {}, description: '[key, value] with values=true' },
                  {
                    type: 'object',
                    description: 'with meta=true (value only with values=true)',
                    required: ['key', 'type', 'size', 'expires_at', 'rev'],
                    properties: {
                      key: { type: 'string' },
                      type: { type: 'string', enum: [...VALUE_TYPES] },
                      size: { type: 'integer', description: 'the stored value in bytes' },
                      expires_at: { type: 'string', nullable: true, format: 'date-time' },
                      rev: { type: 'integer', description: "the key's revision (its ETag)" },
                      value: { description: 'with values=true, as in [key, value]: bytes as base64' },
                    },
                  },
                ],
              },
            },
            example: ['user/1', 'user/2'],
          },
          'application/x-ndjson': { schema: { type: 'string' }, example: '"user/1"\n"user/2"\n' },
          'text/event-stream': {
            schema: {
              type: 'string',
              description: 'with watch=true: one message per transaction (id: revision, event: type, one JSON event per data line)',
            },
            example: 'id: 7\nevent: set\ndata: {"type":"set","key":"user/1","rev":7,"value_type":"text","expires_at":null}\n\n',
          },
        },
      },
      ...bucketErrors,
      406: errorResponse(
        'not_acceptable',
        'Unknown format, or an Accept header that rules out every list format',
        'format must be text, json or jsonl',
      ),
    },
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
