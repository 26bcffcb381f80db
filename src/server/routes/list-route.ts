import { Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import type { Principal } from '../../auth/access.js';
import type { ListedEntry } from '../../store/store.js';
import { KvbError } from '../../errors.js';
import { checkKey } from '../../values/keys.js';
import {
  LIST_CONTENT_TYPES,
  LIST_FORMATS,
  type ListFormat,
  formatFromAccept,
  formatListItem,
} from '../../values/list-format.js';
import { authorize, openBucket } from '../access-control.js';
import type { ServerContext } from '../server-context.js';
import { booleanParam, decodeBucket, optionalInteger, queryOf, singleParam } from '../request-input.js';
import { bucketSchemas } from './schemas.js';

const PAGE_SIZE = 1000;
export const MAX_LIST_LIMIT = 1_000_000;

/** The prefix a listing really uses: a token sees only its own prefix (403 when disjoint). */
function effectivePrefix(principal: Principal, requested: string): string {
  if (principal.kind !== 'token' || requested.startsWith(principal.prefix)) return requested;
  if (principal.prefix.startsWith(requested)) return principal.prefix;
  throw new KvbError('forbidden', "prefix is outside the token's prefix");
}

/** `GET /api/v1/{bucket}/`: keys (and values) in byte order, streamed page by page. */
export async function listRoute(app: FastifyInstance, { store, buckets }: ServerContext): Promise<void> {
  app.get('/api/v1/:bucket/', { schema: bucketSchemas.list }, async (request, reply) => {
    const query = queryOf(request);
    const formatParam = singleParam(query, 'format');
    let format: ListFormat | undefined;
    if (formatParam !== undefined) {
      format = (LIST_FORMATS as readonly string[]).includes(formatParam) ? (formatParam as ListFormat) : undefined;
      if (!format) throw new KvbError('not_acceptable', 'format must be text, json or jsonl');
    } else {
      format = formatFromAccept(request.headers.accept);
      if (!format) throw new KvbError('not_acceptable', 'Accept rules out text/plain, application/json and application/x-ndjson');
    }
    const requestedPrefix = singleParam(query, 'prefix') ?? '';
    if (requestedPrefix !== '') checkKey(requestedPrefix, 'prefix');
    const limit = optionalInteger(query, 'limit', 0, MAX_LIST_LIMIT) ?? 10000;
    const skip = optionalInteger(query, 'skip', 0, Number.MAX_SAFE_INTEGER) ?? 0;
    const reverse = booleanParam(query, 'reverse');
    const withValues = booleanParam(query, 'values');

    const { bucket, principal } = await openBucket(buckets, decodeBucket((request.params as { bucket: string }).bucket), request);
    authorize(bucket, principal, withValues ? 'list_values' : 'enumerate');
    const prefix = effectivePrefix(principal, requestedPrefix);
    const bucketId = bucket.record.id;

    // The first page is read before answering, so a storage error is still a clean error response.
    const now = Date.now();
    const firstPage = await store.listEntries(
      bucketId,
      { prefix, reverse, withValues, offset: skip, limit: Math.min(limit, PAGE_SIZE) },
      now,
    );
    let sent = 0;
    const render = (page: ListedEntry[]) => {
      let chunk = '';
      for (const { key, entry } of page) {
        const item = formatListItem(format!, key, entry);
        chunk += format === 'json' && sent > 0 ? `,${item}` : item;
        sent++;
      }
      return chunk;
    };
    const isLastPage = (page: ListedEntry[]) => page.length < PAGE_SIZE || sent >= limit || page.length === 0;
    const head = (format === 'json' ? '[' : '') + render(firstPage);
    const tail = format === 'json' ? ']\n' : '';
    reply.header('content-type', LIST_CONTENT_TYPES[format]);
    // Most listings fit in one page: one string, sent at once, costs far less than a stream.
    // A Buffer, so the Content-Type is sent exactly as set (a string would gain a charset).
    if (isLastPage(firstPage)) return reply.send(Buffer.from(head + tail));

    async function* body(): AsyncGenerator<string> {
      let page = firstPage;
      if (head) yield head;
      while (!isLastPage(page)) {
        page = await store.listEntries(
          bucketId,
          { prefix, reverse, withValues, offset: 0, limit: Math.min(limit - sent, PAGE_SIZE), after: page[page.length - 1]!.key },
          now,
        );
        const chunk = render(page);
        if (chunk) yield chunk;
      }
      if (tail) yield tail;
    }
    return reply.send(Readable.from(body(), { objectMode: false }));
  });
}
