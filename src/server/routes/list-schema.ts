/** The schema of `GET /api/v1/{bucket}/`: the listing and its modes (list-route.ts). */
import { DEFAULT_LIST_LIMIT, HISTORY_PAGE_DEFAULT, HISTORY_PAGE_MAX, MAX_FOLDER_ITEMS, MAX_LIST_LIMIT, VALUE_TYPES } from '../../limits.js';
import { KEY, anyCredential, bucketErrors, bucketParams, bucketRevision, errorResponse } from './schema-parts.js';

const booleanQuery = (description: string) => ({
  type: 'string',
  enum: ['', 'true', 'false', '1', '0'],
  description: `${description}; true/false/1/0, a bare flag means true (default false)`,
});

export const listSchema = {
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
};
