/** The schema of `POST /api/v1/{bucket}`: a transaction, an import or a rollback (transaction-route.ts). */
import { VALUE_TYPES } from '../../limits.js';
import { secret, webhook } from './webhook-schemas.js';
import { KEY, anyCredential, bucketParams, commitRevision, errorResponse, keyErrors, noBody, noBucket } from './schema-parts.js';
import { txnBodySchema } from './txn-operations.js';

export const transactionSchema = {
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
  // Documents the body only: the parser is its one check (txn-operations.ts says why).
  rawBody: txnBodySchema,
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
};
