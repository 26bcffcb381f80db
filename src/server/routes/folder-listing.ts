/**
 * `GET /api/v1/{bucket}/?prefix=P&delimiter=D` (a kvb extension, S3's common prefixes): the keys
 * directly under P, and for every deeper key only its folder (P up to and including the first D
 * after it), each once, in key order. A folder is found by its first key and then skipped with
 * one index seek past everything that starts with it, so a folder of 30,000 keys costs one read,
 * not 30 pages. Items: `{"key":K}` (with meta=true or values=true the meta listing's object) and
 * `{"prefix":F}`, as a JSON array or JSONL. At most MAX_FOLDER_ITEMS per answer; the cursor
 * continues after the last item (after a folder: past all of it).
 */
import type { FastifyReply } from 'fastify';
import type { Entry, EntryMeta, ListColumns, ListedEntry } from '../../store/store.js';
import { LIST_CONTENT_TYPES, type ListFormat } from '../../values/list-format.js';
import { formatListMeta } from '../../values/list-meta.js';
import { MAX_FOLDER_ITEMS, MAX_KEY_BYTES } from '../../limits.js';
import type { BucketRecord } from '../../store/store.js';
import { encodeCursor } from '../list-cursor.js';
import { timeSlicer } from '../../store/time-slicer.js';

/**
 * Keys read per storage read between seeks: FIRST_ROWS after a seek, doubling up to PAGE_ROWS
 * while no folder turns up. (Always PAGE_ROWS, 10,000 one-key folders read 2.5 million rows to
 * use 10,000 of them.)
 */
const PAGE_ROWS = 256;
const FIRST_ROWS = 16;

/**
 * A position after every key that starts with `folder` and before every key that does not: the
 * folder followed by the largest UTF-8 character, repeated past the longest key, sorts after any
 * key (at most MAX_KEY_BYTES) that starts with the folder, and a key sorting after it no longer
 * starts with the folder. Never stored, only compared (as bytes) in `key > position`.
 */
export function pastFolder(folder: string): string {
  return folder + '\u{10FFFF}'.repeat(Math.ceil(MAX_KEY_BYTES / 4) + 1);
}

/** The folder `key` is in below `prefix` (up to and including the first delimiter after the prefix), or undefined for a direct key. */
export function folderOf(key: string, prefix: string, delimiter: string): string | undefined {
  const at = key.indexOf(delimiter, prefix.length);
  return at < 0 ? undefined : key.slice(0, at + delimiter.length);
}

/** One page of the listing's keys after a position (the present, or a past revision's: the list route's read). */
export type FolderRead = (after: string | undefined, rows: number) => Promise<ListedEntry[]>;

export interface FolderQuery {
  read: FolderRead;
  bucket: BucketRecord;
  prefix: string;
  delimiter: string;
  reverse: boolean;
  columns: ListColumns;
  format: Extract<ListFormat, 'json' | 'jsonl'>;
  limit: number;
  /** Continue after this position (a cursor's). */
  after: string | undefined;
  /** The request's query and path, for the Link header. */
  query: Record<string, unknown>;
  path: string;
}

const metaOf = (entry: Entry): EntryMeta => ({
  type: entry.type,
  size: entry.data.length,
  expiresAt: entry.expiresAt,
  revision: entry.revision,
});

function renderKey({ key, entry, meta }: ListedEntry): string {
  if (entry) return formatListMeta(key, metaOf(entry), entry);
  if (meta) return formatListMeta(key, meta);
  return `{"key":${JSON.stringify(key)}}`;
}

/** Reads the items of one answer; `next` is the position to continue from when more follow. */
export async function readFolderItems(
  q: Omit<FolderQuery, 'format' | 'query' | 'path'>,
): Promise<{ items: string[]; next: string | undefined }> {
  const items: string[] = [];
  const limit = Math.min(q.limit, MAX_FOLDER_ITEMS);
  let after = q.after;
  let rows = FIRST_ROWS;
  // One read per folder: between them, other requests get their turn (SQLite reads block; see timeSlicer).
  const slice = timeSlicer();
  const read: FolderRead = async (from, count) => {
    await slice();
    return q.read(from, count);
  };
  for (;;) {
    if (items.length >= limit) {
      // Full: keys follow only if one more row exists past the position.
      const more = await read(after, 1);
      return { items, next: more.length > 0 ? after : undefined };
    }
    const page = await read(after, rows);
    let seeked = false;
    for (const row of page) {
      const folder = folderOf(row.key, q.prefix, q.delimiter);
      if (folder === undefined) {
        items.push(renderKey(row));
        after = row.key;
      } else {
        items.push(`{"prefix":${JSON.stringify(folder)}}`);
        // Forward, the folder's first key was met: continue past all of it. Reverse, its last
        // key was met: every key before the folder name is outside it.
        after = q.reverse ? folder : pastFolder(folder);
        seeked = true;
      }
      if (seeked || items.length >= limit) break;
    }
    if (!seeked && page.length < rows && items.length < limit) return { items, next: undefined };
    rows = seeked ? FIRST_ROWS : Math.min(PAGE_ROWS, rows * 2);
  }
}

/** Answers a delimiter listing (the list route has checked the bucket, the credential and the parameters). */
export async function folderListing(q: FolderQuery, reply: FastifyReply): Promise<FastifyReply> {
  const { items, next } = await readFolderItems(q);
  if (next !== undefined) {
    const cursor = encodeCursor(q.bucket, { prefix: q.prefix, reverse: q.reverse, lastKey: next });
    const params = new URLSearchParams();
    for (const [name, value] of Object.entries(q.query)) {
      if (!['cursor', 'access_token', 'key'].includes(name) && typeof value === 'string') params.set(name, value);
    }
    params.set('cursor', cursor);
    reply.header('kvb-next-cursor', cursor);
    reply.header('link', `<${q.path}?${params.toString()}>; rel="next"`);
  }
  reply.header('content-type', LIST_CONTENT_TYPES[q.format]);
  const body = q.format === 'json' ? `[${items.join(',')}]\n` : items.map((item) => `${item}\n`).join('');
  return reply.send(Buffer.from(body));
}
