import { Readable } from 'node:stream';
import type { FastifyReply } from 'fastify';
import type { BucketRecord, Entry, EntryMeta, ListColumns, ListedEntry } from '../../store/store.js';
import { LIST_CONTENT_TYPES, type ListFormat, formatListItem } from '../../values/list-format.js';
import { formatListMeta } from '../../values/list-meta.js';
import { compareKeys } from '../../values/key-order.js';
import { encodeCursor } from '../list-cursor.js';
import type { ResponseStreams } from '../response-streams.js';

/** One storage read of a listing: rows after `after` (skipping `offset`), with the listing's columns unless `only` says otherwise. */
export type ListingRead = (after: string | undefined, offset: number, rows: number, only?: ListColumns) => Promise<ListedEntry[]>;

/** A plain listing (no delimiter), as its query asked for it. */
export interface KeyListing {
  read: ListingRead;
  bucket: BucketRecord;
  prefix: string;
  reverse: boolean;
  format: ListFormat;
  withMeta: boolean;
  limit: number;
  skip: number;
  /** Rows per storage read after the first. */
  pageRows: number;
  /** The cursor's position, if any. */
  after: string | undefined;
  query: Record<string, unknown>;
  /** The request's path, for the Link header. */
  path: string;
}

/** The first page, and where the response ends. */
interface FirstPage {
  page: ListedEntry[];
  /** Rows asked for (one more was read, to tell whether keys follow). */
  rows: number;
  /** The last key of this response, when keys follow it (then it is the cursor's position). */
  lastKey: string | undefined;
  /** The response ends after this key (inclusive); undefined: after `limit` rows. */
  endKey: string | undefined;
}

const metaOf = (entry: Entry): EntryMeta => ({
  type: entry.type,
  size: entry.data.length,
  expiresAt: entry.expiresAt,
  revision: entry.revision,
});

/**
 * Keys (and values) in byte order, streamed page by page. The first page is read before
 * answering, so a storage error is still a clean error response.
 */
export async function keyListing(q: KeyListing, streams: ResponseStreams, reply: FastifyReply): Promise<FastifyReply> {
  const first = await readFirstPage(q);
  if (first.lastKey !== undefined) nextCursorHeaders(q, first.lastKey, reply);
  const body = new ListingBody(q.format, q.withMeta, q.limit, q.reverse, first.endKey);
  const head = (q.format === 'json' ? '[' : '') + body.render(first.page);
  const tail = q.format === 'json' ? ']\n' : '';
  reply.header('content-type', LIST_CONTENT_TYPES[q.format]);
  streams.guard(reply);
  // Most listings fit in one page: one string, sent at once, costs far less than a stream.
  // A Buffer, so the Content-Type is sent exactly as set (a string would gain a charset).
  if (body.isLastPage(first.page, first.rows)) return reply.send(Buffer.from(head + tail));
  streams.acquire(reply);
  return reply.send(Readable.from(laterPages(q, body, first, head, tail), { objectMode: false }));
}

/** One row more than asked for tells whether keys follow, so a last page is never empty. */
async function readFirstPage(q: KeyListing): Promise<FirstPage> {
  const { limit, skip } = q;
  const rows = Math.min(limit, q.pageRows);
  const page = await q.read(q.after, skip, rows + 1);
  let lastKey: string | undefined;
  let endKey: string | undefined;
  if (page.length > rows) {
    if (rows === limit) {
      lastKey = page[limit - 1]?.key;
      endKey = lastKey;
    } else {
      // A long page: find its last key first (keys only, from the index), so the headers can
      // carry the cursor. The body then streams up to that key: a key present throughout is
      // sent exactly once, even if writes land in the range meanwhile.
      const boundary = await q.read(q.after, skip + limit - 1, 2, 'keys');
      if (boundary.length > 0) endKey = boundary[0]!.key;
      if (boundary.length > 1) lastKey = endKey;
    }
  }
  if (limit > 0 && page.length > rows) page.length = rows;
  if (limit === 0) page.length = 0;
  return { page, rows, lastKey, endKey };
}

/** Kvb-Next-Cursor and a Link to the next page, the query kept but for its position and credentials. */
function nextCursorHeaders(q: KeyListing, lastKey: string, reply: FastifyReply): void {
  const next = encodeCursor(q.bucket, { prefix: q.prefix, reverse: q.reverse, lastKey });
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(q.query)) {
    // Credentials in the query string are not echoed back into a header.
    if (!['cursor', 'skip', 'access_token', 'key'].includes(name) && typeof value === 'string') params.set(name, value);
  }
  params.set('cursor', next);
  reply.header('kvb-next-cursor', next);
  reply.header('link', `<${q.path}?${params.toString()}>; rel="next"`);
}

/** The pages after the first, read as the client takes them. */
async function* laterPages(q: KeyListing, body: ListingBody, first: FirstPage, head: string, tail: string): AsyncGenerator<string> {
  let page = first.page;
  if (head) yield head;
  let asked = first.rows;
  while (!body.isLastPage(page, asked)) {
    // Up to endKey, the range decides (keys written into it meanwhile are sent too); else `limit` does.
    asked = first.endKey === undefined ? Math.min(q.limit - body.sent, q.pageRows) : q.pageRows;
    page = await q.read(page[page.length - 1]!.key, 0, asked);
    const chunk = body.render(page);
    if (chunk) yield chunk;
  }
  if (tail) yield tail;
}

/** Renders pages into the body, counting what it sent and stopping at the response's end. */
export class ListingBody {
  sent = 0;
  done = false;

  constructor(
    private readonly format: ListFormat,
    private readonly withMeta: boolean,
    private readonly limit: number,
    private readonly reverse: boolean,
    private readonly endKey: string | undefined,
  ) {}

  render(page: ListedEntry[]): string {
    const { format, endKey, reverse } = this;
    let chunk = '';
    for (const { key, entry, meta } of page) {
      const beyond = endKey === undefined ? this.sent >= this.limit : reverse ? compareKeys(key, endKey) < 0 : compareKeys(key, endKey) > 0;
      if (beyond) {
        this.done = true;
        break;
      }
      const item = this.withMeta
        ? (entry ? formatListMeta(key, metaOf(entry), entry) : formatListMeta(key, meta!)) + (format === 'jsonl' ? '\n' : '')
        : formatListItem(format, key, entry);
      chunk += format === 'json' && this.sent > 0 ? `,${item}` : item;
      this.sent++;
      if (key === endKey) this.done = true;
    }
    return chunk;
  }

  isLastPage(page: ListedEntry[], asked: number): boolean {
    return this.done || page.length < asked || (this.endKey === undefined && this.sent >= this.limit);
  }
}
