import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ListColumns, Store } from '../../store/store.js';
import { KvbError } from '../../errors.js';
import { DEFAULT_LIST_LIMIT, MAX_KEY_BYTES, MAX_LIST_LIMIT } from '../../limits.js';
import { checkKey } from '../../values/keys.js';
import { LIST_FORMATS, type ListFormat, formatFromAccept } from '../../values/list-format.js';
import { authorize, openBucket } from '../access-control.js';
import { decodeCursor } from '../list-cursor.js';
import { ResponseStreams } from '../response-streams.js';
import type { ServerContext } from '../server-context.js';
import { type Query, booleanParam, bucketIdOf, queryCount, queryOf, singleParam } from '../request-input.js';
import { effectivePrefix } from './effective-prefix.js';
import { exportBucket } from './export-route.js';
import { folderListing } from './folder-listing.js';
import { listSchema } from './list-schema.js';
import { watchStream } from './watch-stream.js';
import { pastValue, revisionParam } from './history-routes.js';
import { bucketLogRoute } from './bucket-log-route.js';
import { type ListingRead, keyListing } from './key-listing.js';

/**
 * Rows per storage read. Pages are bounded by bytes, not only rows: a key is at most 128 bytes, a
 * value at most 16 KiB, so 1000 keys or 128 keys with values stay near 2 MiB of rows per page.
 */
const KEY_PAGE_ROWS = 1000;
const VALUE_PAGE_ROWS = 128;

/**
 * `GET /api/v1/{bucket}/`: one route for its modes (the bucket's log, export, watch, listing),
 * chosen by the query, so a bad or unknown parameter is answered the same whatever the mode.
 * Not a route per mode through a find-my-way constraint: a constraint strategy runs on every
 * request the router sees, every route's included, on the raw URL before the query is parsed (so it
 * would parse and decode the query a second time, restating checkQuery's choice of mode), and the
 * OpenAPI document has one operation per method and path: the modes' schemas would overwrite each other.
 */
export async function listRoute(app: FastifyInstance, ctx: ServerContext): Promise<void> {
  const streams = new ResponseStreams(ctx.config.maxStreamedResponses, ctx.config.stalledReaderTimeoutSeconds * 1000);
  app.get('/api/v1/:bucket/', { schema: listSchema }, async (request, reply) => {
    const query = queryOf(request);
    if (booleanParam(query, 'history')) return bucketLogRoute(ctx, request, reply);
    if (booleanParam(query, 'export')) return exportBucket(ctx, streams, request, reply);
    if (booleanParam(query, 'watch')) return watchStream(request, reply, ctx);
    return listKeys(ctx, streams, request, reply);
  });
}

/** What a listing's query asks for, checked before the bucket is opened. */
export interface ListingQuery {
  format: ListFormat;
  requestedPrefix: string;
  limit: number;
  skip: number;
  reverse: boolean;
  withValues: boolean;
  /** Extension: one object per key with its type, size, expiry and revision (json and jsonl), with or without the value. */
  withMeta: boolean;
  columns: ListColumns;
  cursor: string | undefined;
  /** Extension: S3's common prefixes (folder-listing.ts). */
  delimiter: string | undefined;
}

/** The listing's parameters, each checked in turn (the first bad one is the 400 or 406). */
export function listingQueryOf(query: Query, accept: string | undefined): ListingQuery {
  const format = listFormatOf(query, accept);
  const requestedPrefix = singleParam(query, 'prefix') ?? '';
  if (requestedPrefix !== '') checkKey(requestedPrefix, 'prefix');
  const limit = queryCount(query, 'limit', 0, MAX_LIST_LIMIT) ?? DEFAULT_LIST_LIMIT;
  const skip = queryCount(query, 'skip', 0, Number.MAX_SAFE_INTEGER) ?? 0;
  const reverse = booleanParam(query, 'reverse');
  const withValues = booleanParam(query, 'values');
  const cursor = singleParam(query, 'cursor');
  const withMeta = booleanParam(query, 'meta');
  if (withMeta && format === 'text') throw new KvbError('bad_request', 'meta=true needs format json or jsonl');
  const columns: ListColumns = withValues ? 'values' : withMeta ? 'meta' : 'keys';
  const delimiter = singleParam(query, 'delimiter');
  if (delimiter !== undefined) {
    if (delimiter === '' || Buffer.byteLength(delimiter) > MAX_KEY_BYTES)
      throw new KvbError('bad_request', `delimiter must be 1 to ${MAX_KEY_BYTES} bytes`);
    if (format === 'text') throw new KvbError('bad_request', 'delimiter needs format json or jsonl');
    if (skip > 0) throw new KvbError('bad_request', 'skip cannot be used with delimiter: continue with the cursor');
  }
  return { format, requestedPrefix, limit, skip, reverse, withValues, withMeta, columns, cursor, delimiter };
}

/** `format=` when given, else the Accept header's choice. */
function listFormatOf(query: Query, accept: string | undefined): ListFormat {
  const formatParam = singleParam(query, 'format');
  if (formatParam !== undefined) {
    if (!(LIST_FORMATS as readonly string[]).includes(formatParam))
      throw new KvbError('not_acceptable', 'format must be text, json or jsonl');
    return formatParam as ListFormat;
  }
  const format = formatFromAccept(accept);
  if (!format) throw new KvbError('not_acceptable', 'Accept rules out text/plain, application/json and application/x-ndjson');
  return format;
}

/** The listing's storage read: the live keys, or with `rev=N` the bucket as it was at revision N. */
export function listingRead(
  store: Store,
  bucketId: string,
  scope: { prefix: string; reverse: boolean; columns: ListColumns },
  pastRevision: number | undefined,
  now: number,
): ListingRead {
  const { prefix, reverse, columns } = scope;
  return async (after, offset, rows, only = columns) => {
    const q = { prefix, reverse, columns: only, offset, limit: rows, ...(after !== undefined && { after }) };
    if (pastRevision === undefined) return store.listEntries(bucketId, q, now);
    return pastValue(await store.history.listAt(bucketId, q, pastRevision), pastRevision);
  };
}

/** A listing of keys (and values), plain or by folder, streamed page by page, continued by cursor. */
async function listKeys(ctx: ServerContext, streams: ResponseStreams, request: FastifyRequest, reply: FastifyReply) {
  const { store, buckets, clock } = ctx;
  const query = queryOf(request);
  const asked = listingQueryOf(query, request.headers.accept);
  const { reverse, columns, delimiter } = asked;
  const { bucket, principal } = await openBucket(buckets, bucketIdOf(request), request);
  // Metadata reveals the value's type and size, so it needs what reading values needs.
  authorize(bucket, principal, columns === 'keys' ? 'enumerate' : 'list_values');
  const prefix = effectivePrefix(principal, asked.requestedPrefix);
  const bucketId = bucket.record.id;
  const after = asked.cursor === undefined ? undefined : decodeCursor(bucket.record, asked.cursor, { prefix, reverse });
  const pastRevision = revisionParam(request);
  const read = listingRead(store, bucketId, { prefix, reverse, columns }, pastRevision, clock());
  // The bucket revision is read first: the listing reflects at least every change up to it.
  const revision = pastRevision ?? (await store.buckets.revision(bucketId));
  if (revision === undefined) throw new KvbError('not_found', 'no such bucket');
  reply.header('kvb-revision', String(revision));
  const path = request.url.split('?')[0]!;
  const { format, limit } = asked;
  if (delimiter !== undefined) {
    // The same read as a plain listing's: at `rev` the folders are those of that revision (400/410 as for any `rev`).
    const folderRead = (after: string | undefined, rows: number) => read(after, 0, rows);
    const base = { bucket: bucket.record, prefix, delimiter, reverse, columns, limit, after, query, path };
    return folderListing({ ...base, read: folderRead, format: format as 'json' | 'jsonl' }, reply);
  }
  const pageRows = asked.withValues ? VALUE_PAGE_ROWS : KEY_PAGE_ROWS;
  const listing = { read, bucket: bucket.record, prefix, reverse, format, withMeta: asked.withMeta, limit, skip: asked.skip };
  return keyListing({ ...listing, pageRows, after, query, path }, streams, reply);
}
