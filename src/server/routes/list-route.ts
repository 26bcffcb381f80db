import { Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import type { Entry, EntryMeta, ListColumns, ListedEntry } from '../../store/store.js';
import { KvbError } from '../../errors.js';
import { DEFAULT_LIST_LIMIT, MAX_KEY_BYTES, MAX_LIST_LIMIT } from '../../limits.js';
import { checkKey } from '../../values/keys.js';
import { LIST_CONTENT_TYPES, LIST_FORMATS, type ListFormat, formatFromAccept, formatListItem } from '../../values/list-format.js';
import { authorize, openBucket } from '../access-control.js';
import { decodeCursor, encodeCursor } from '../list-cursor.js';
import { ResponseStreams } from '../response-streams.js';
import type { ServerContext } from '../server-context.js';
import { booleanParam, bucketIdOf, optionalInteger, queryOf, singleParam } from '../request-input.js';
import { effectivePrefix } from './effective-prefix.js';
import { exportBucket } from './export-route.js';
import { folderListing } from './folder-listing.js';
import { formatListMeta } from '../../values/list-meta.js';
import { bucketSchemas } from './bucket-schemas.js';
import { watchStream } from './watch-stream.js';
import { pastValue, revisionParam } from './history-routes.js';
import { bucketLogRoute } from './bucket-log-route.js';
import { compareKeys } from '../../values/key-order.js';

/**
 * Rows per storage read. Pages are bounded by bytes, not only rows: a key is at most 128 bytes, a
 * value at most 16 KiB, so 1000 keys or 128 keys with values stay near 2 MiB of rows per page.
 */
const KEY_PAGE_ROWS = 1000;
const VALUE_PAGE_ROWS = 128;

const metaOf = (entry: Entry): EntryMeta => ({
  type: entry.type,
  size: entry.data.length,
  expiresAt: entry.expiresAt,
  revision: entry.revision,
});

/** Byte order of keys as stored (UTF-8), which is not JavaScript's string order. */

/** `GET /api/v1/{bucket}/`: keys (and values) in byte order, streamed page by page, continued by cursor. */
export async function listRoute(app: FastifyInstance, ctx: ServerContext): Promise<void> {
  const { store, buckets, config, clock } = ctx;
  const streams = new ResponseStreams(config.maxStreamedResponses, config.stalledReaderTimeoutSeconds * 1000);
  app.get('/api/v1/:bucket/', { schema: bucketSchemas.list }, async (request, reply) => {
    const query = queryOf(request);
    if (booleanParam(query, 'history')) return bucketLogRoute(ctx, request, reply);
    if (booleanParam(query, 'export')) return exportBucket(ctx, streams, request, reply);
    if (booleanParam(query, 'watch')) return watchStream(request, reply, ctx);
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
    const limit = optionalInteger(query, 'limit', 0, MAX_LIST_LIMIT) ?? DEFAULT_LIST_LIMIT;
    const skip = optionalInteger(query, 'skip', 0, Number.MAX_SAFE_INTEGER) ?? 0;
    const reverse = booleanParam(query, 'reverse');
    const withValues = booleanParam(query, 'values');
    const cursor = singleParam(query, 'cursor');
    // Extension: one object per key with its type, size, expiry and revision (json and jsonl),
    // with or without the value.
    const withMeta = booleanParam(query, 'meta');
    if (withMeta && format === 'text') throw new KvbError('bad_request', 'meta=true needs format json or jsonl');
    const columns: ListColumns = withValues ? 'values' : withMeta ? 'meta' : 'keys';
    // Extension: S3's common prefixes (folder-listing.ts).
    const delimiter = singleParam(query, 'delimiter');
    if (delimiter !== undefined) {
      if (delimiter === '' || Buffer.byteLength(delimiter) > MAX_KEY_BYTES)
        throw new KvbError('bad_request', `delimiter must be 1 to ${MAX_KEY_BYTES} bytes`);
      if (format === 'text') throw new KvbError('bad_request', 'delimiter needs format json or jsonl');
      if (skip > 0) throw new KvbError('bad_request', 'skip cannot be used with delimiter: continue with the cursor');
    }

    const { bucket, principal } = await openBucket(buckets, bucketIdOf(request), request);
    // Metadata reveals the value's type and size, so it needs what reading values needs.
    authorize(bucket, principal, columns === 'keys' ? 'enumerate' : 'list_values');
    const prefix = effectivePrefix(principal, requestedPrefix);
    const bucketId = bucket.record.id;
    const startAfter = cursor === undefined ? undefined : decodeCursor(bucket.record, cursor, { prefix, reverse });
    const pageRows = withValues ? VALUE_PAGE_ROWS : KEY_PAGE_ROWS;
    // History: `rev=N` lists the bucket as it was at revision N.
    const pastRevision = revisionParam(request);
    const now = clock();
    const read = async (after: string | undefined, offset: number, rows: number, only: ListColumns = columns) => {
      const q = { prefix, reverse, columns: only, offset, limit: rows, ...(after !== undefined && { after }) };
      if (pastRevision === undefined) return store.listEntries(bucketId, q, now);
      return pastValue(await store.history.listAt(bucketId, q, pastRevision), pastRevision);
    };

    // The bucket revision is read first: the listing reflects at least every change up to it.
    const revision = pastRevision ?? (await store.buckets.revision(bucketId));
    if (revision === undefined) throw new KvbError('not_found', 'no such bucket');
    reply.header('kvb-revision', String(revision));
    if (delimiter !== undefined) {
      const path = request.url.split('?')[0]!;
      // The same read as a plain listing's: at `rev` the folders are those of that revision (400/410 as for any `rev`).
      const folderRead = (after: string | undefined, rows: number) => read(after, 0, rows);
      const q = {
        read: folderRead,
        bucket: bucket.record,
        prefix,
        delimiter,
        reverse,
        columns,
        format: format as 'json' | 'jsonl',
        limit,
        after: startAfter,
        query,
        path,
      };
      return folderListing(q, reply);
    }
    // The first page is read before answering, so a storage error is still a clean error response.
    // One row more than asked for tells whether keys follow, so a last page is never empty.
    const firstRows = Math.min(limit, pageRows);
    const firstPage = await read(startAfter, skip, firstRows + 1);
    /** The last key of this response, when keys follow it (then it is the cursor's position). */
    let lastKey: string | undefined;
    /** The response ends after this key (inclusive); undefined: after `limit` rows. */
    let endKey: string | undefined;
    if (firstPage.length > firstRows) {
      if (firstRows === limit) {
        lastKey = firstPage[limit - 1]?.key;
        endKey = lastKey;
      } else {
        // A long page: find its last key first (keys only, from the index), so the headers can
        // carry the cursor. The body then streams up to that key: a key present throughout is
        // sent exactly once, even if writes land in the range meanwhile.
        const boundary = await read(startAfter, skip + limit - 1, 2, 'keys');
        if (boundary.length > 0) endKey = boundary[0]!.key;
        if (boundary.length > 1) lastKey = endKey;
      }
    }
    if (limit > 0 && firstPage.length > firstRows) firstPage.length = firstRows;
    if (limit === 0) firstPage.length = 0;
    if (lastKey !== undefined) {
      const next = encodeCursor(bucket.record, { prefix, reverse, lastKey });
      const params = new URLSearchParams();
      for (const [name, value] of Object.entries(query)) {
        // Credentials in the query string are not echoed back into a header.
        if (!['cursor', 'skip', 'access_token', 'key'].includes(name) && typeof value === 'string') params.set(name, value);
      }
      params.set('cursor', next);
      reply.header('kvb-next-cursor', next);
      reply.header('link', `<${request.url.split('?')[0]}?${params.toString()}>; rel="next"`);
    }

    let sent = 0;
    let done = false;
    const render = (page: ListedEntry[]) => {
      let chunk = '';
      for (const { key, entry, meta } of page) {
        const beyond = endKey === undefined ? sent >= limit : reverse ? compareKeys(key, endKey) < 0 : compareKeys(key, endKey) > 0;
        if (beyond) {
          done = true;
          break;
        }
        const item = withMeta
          ? (entry ? formatListMeta(key, metaOf(entry), entry) : formatListMeta(key, meta!)) + (format === 'jsonl' ? '\n' : '')
          : formatListItem(format!, key, entry);
        chunk += format === 'json' && sent > 0 ? `,${item}` : item;
        sent++;
        if (key === endKey) done = true;
      }
      return chunk;
    };
    const isLastPage = (page: ListedEntry[], asked: number) => done || page.length < asked || (endKey === undefined && sent >= limit);
    const head = (format === 'json' ? '[' : '') + render(firstPage);
    const tail = format === 'json' ? ']\n' : '';
    reply.header('content-type', LIST_CONTENT_TYPES[format]);
    streams.guard(reply);
    // Most listings fit in one page: one string, sent at once, costs far less than a stream.
    // A Buffer, so the Content-Type is sent exactly as set (a string would gain a charset).
    if (isLastPage(firstPage, firstRows)) return reply.send(Buffer.from(head + tail));
    streams.acquire(reply);

    async function* body(): AsyncGenerator<string> {
      let page = firstPage;
      if (head) yield head;
      let asked = firstRows;
      while (!isLastPage(page, asked)) {
        // Up to endKey, the range decides (keys written into it meanwhile are sent too); else `limit` does.
        asked = endKey === undefined ? Math.min(limit - sent, pageRows) : pageRows;
        page = await read(page[page.length - 1]!.key, 0, asked);
        const chunk = render(page);
        if (chunk) yield chunk;
      }
      if (tail) yield tail;
    }
    return reply.send(Readable.from(body(), { objectMode: false }));
  });
}
