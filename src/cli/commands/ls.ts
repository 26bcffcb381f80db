import { Option } from '@commander-js/extra-typings';
import { defineCommand, examples, integer } from '../define-command.js';
import { data, pipe, progress, stdoutIsTty, table, warn } from '../output.js';
import { type MetaRow, int64AsString, metaRowOf, renderLongTable, renderValuesTable } from '../values-table.js';
import { KvbHttpError, networkErrorFor } from '../../client/client-errors.js';
import type { KvbHttp } from '../../client/kvb-http.js';
import { withClient } from '../session.js';
import { MAX_LIST_LIMIT } from '../../limits.js';

/** Splits one jsonl line `["key",value]` into the key and the value's exact JSON text. */
function splitPair(lineText: string): [string, string] {
  const [key] = JSON.parse(lineText) as [string];
  const raw = lineText.slice(1 + JSON.stringify(key).length + 1, -1);
  const value = raw.startsWith('"') ? (JSON.parse(raw) as string) : raw;
  return [key, value];
}

/** `kvb ls [PREFIX]`: a table for people, the server's own formats (streamed) for scripts. */
export const ls = defineCommand({
  define: (parent) =>
    parent
      .command('ls')
      .description('list keys (and values) in byte order')
      .argument('[prefix]', 'only keys starting with this')
      .addOption(
        new Option('--limit <n>', 'at most this many keys (default: every key; ls follows the pages)').argParser(
          integer('--limit', 0, MAX_LIST_LIMIT),
        ),
      )
      .addOption(new Option('--skip <n>', 'skip this many keys first').argParser(integer('--skip', 0, Number.MAX_SAFE_INTEGER)))
      .option('--reverse', 'reverse byte order')
      .option('--values', 'include the values')
      .option('-l, --long', 'long listing: type, size, expiry and revision of each key')
      .addOption(
        new Option('--folders', 'keys directly under PREFIX and each folder below it once (ending in /), like ls of a directory').conflicts(
          ['values', 'skip', 'long'],
        ),
      )
      .addOption(
        new Option('--rev <n>', 'list the bucket as it was at revision N (history; exits 7 below its history floor)').argParser(
          integer('--rev', 0, Number.MAX_SAFE_INTEGER),
        ),
      )
      .addOption(
        new Option('--format <format>', 'table (default on a terminal), text (default when piped), json or jsonl').choices([
          'table',
          'text',
          'json',
          'jsonl',
        ] as const),
      )
      .addHelpText(
        'after',
        `
Every format streams page by page, so large buckets are never held in memory.
Keys alone are the server's own formats, passed through. With --values or -l,
json and jsonl give one object per key that carries its type:
  {"key","type","size","expires_at","rev","value"}
(value with --values: json as is, text a string, int64 a decimal string, float64
a number, bytes base64); text gives key=value lines (\\, newline and = escaped)
or, with -l, tab-separated key, type, size, expires_at (or -) and rev.
At a terminal, -l is a table of key, type, size, expiry and revision that fits
its width.

--folders asks the server for a folder listing: it seeks past each folder
instead of reading it, so a folder of millions of keys costs one lookup. json
and jsonl then print {"key":K} and {"prefix":"F/"} items; text and the table
print names, folders ending in /.
${examples('kvb ls user/', 'kvb ls -l', 'kvb ls --values --limit 20', 'kvb ls --format jsonl --values | jq -r \'select(.type=="int64") | .key\'', 'kvb ls --format json | jq length', 'kvb ls --folders', 'kvb ls --folders photos/2024/')}`,
      ),
  async run(prefix, options, command) {
    await withClient(command, async ({ client, bucket }) => {
      const format = options.format ?? (stdoutIsTty() ? 'table' : 'text');
      const id = bucket();
      if (options.folders) {
        const { listFolders } = await import('../ls-folders.js');
        return listFolders(client, id, { prefix, reverse: options.reverse, limit: options.limit, format });
      }
      const listing: Listing = { client, bucket: id, prefix, options };
      const shown = progress('listed');
      let keys = 0;
      let bytes = 0;
      let failed = false;
      const count = (chunk: Buffer) => {
        bytes += chunk.length;
        for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, i + 1)) keys++;
        shown.update(keys, bytes);
      };
      try {
        if (format === 'table') await printTable(listing, count, () => shown.done());
        else await streamListing(listing, format, count);
      } catch (err) {
        failed = true;
        throw err;
      } finally {
        shown.done();
        // `kvb ls 'user/*'` out of habit from shells and globs: an empty answer alone does not say why.
        if (!failed && bytes === 0 && prefix !== undefined && /[*?]/.test(prefix)) {
          warn(
            `no keys start with ${JSON.stringify(prefix)}: kvb ls lists by prefix, where * and ? are plain characters (kvb ls user/ lists every key starting with user/)`,
          );
        }
      }
    });
  },
});

/** The flags a listing reads. */
interface LsFlags {
  limit?: number | undefined;
  skip?: number | undefined;
  reverse?: true | undefined;
  values?: true | undefined;
  long?: true | undefined;
  rev?: number | undefined;
}

/** One `kvb ls` listing: where, and what was asked. */
interface Listing {
  client: KvbHttp;
  bucket: string;
  prefix: string | undefined;
  options: LsFlags;
}

/**
 * Every page of the listing, following Kvb-Next-Cursor until the last page or --limit: each page
 * streams through as it arrives, so memory stays constant however many keys.
 */
async function* pages(
  { client, bucket, prefix, options }: Listing,
  pageFormat: 'text' | 'json' | 'jsonl',
  meta?: boolean,
): AsyncGenerator<AsyncIterable<Uint8Array>> {
  const wanted = options.limit ?? Number.POSITIVE_INFINITY;
  const query = { prefix, reverse: options.reverse, values: options.values, revision: options.rev };
  let cursor: string | undefined;
  let listed = 0;
  let first = true;
  do {
    const limit = Math.min(PAGE_KEYS, wanted - listed);
    const page = await client.listPage(bucket, {
      ...query,
      meta,
      format: pageFormat,
      limit,
      skip: first ? options.skip : undefined,
      cursor,
    });
    first = false;
    yield page.body;
    listed += limit;
    cursor = page.nextCursor;
  } while (cursor !== undefined && listed < wanted);
}

/** A listing lost mid-way is still a network failure (exit 4), not a crash; the server's own errors pass as they are. */
function asNetworkError(client: KvbHttp, err: unknown): never {
  if (err instanceof KvbHttpError) throw err;
  throw networkErrorFor(client.url, err);
}

/** text, json or jsonl, streamed to stdout page by page. */
async function streamListing(listing: Listing, format: 'text' | 'json' | 'jsonl', count: (chunk: Buffer) => void): Promise<void> {
  const { Readable } = await import('node:stream');
  const { options } = listing;
  // With -l, or values in json/jsonl: objects that carry the type (the listing's meta=true), int64 values as decimal strings.
  const body =
    options.long || (options.values && format !== 'text')
      ? typedListing(joinPages(pages(listing, 'jsonl', true), 'jsonl', count), format)
      : joinPages(pages(listing, format), format, count);
  await pipe(Readable.from(body)).catch((err: unknown) => asNetworkError(listing.client, err));
}

/**
 * A table is for people: read it whole, then lay it out. With values, each key comes with its
 * type, size and expiry (the listing's meta=true) for a one-line-per-key table.
 */
async function printTable(listing: Listing, count: (chunk: Buffer) => void, read: () => void): Promise<void> {
  const { options } = listing;
  const chunks: Buffer[] = [];
  try {
    for await (const chunk of joinPages(pages(listing, 'jsonl', options.values || options.long), 'jsonl', count)) chunks.push(chunk);
  } catch (err) {
    asNetworkError(listing.client, err);
  }
  read();
  const lines = Buffer.concat(chunks)
    .toString('utf8')
    .split('\n')
    .filter((lineText) => lineText !== '');
  const width = process.stdout.columns || 80;
  if (options.long && !options.values) {
    await data(
      renderLongTable(
        lines.map((lineText) => JSON.parse(lineText) as MetaRow),
        width,
        Date.now(),
      ),
    );
    return;
  }
  // A server without the meta extension answers [key, value] pairs: the older bordered table.
  if (options.values && (lines.length === 0 || lines[0]!.startsWith('{'))) {
    await data(renderValuesTable(lines.map(metaRowOf), width, Date.now()));
    return;
  }
  const rows = lines.map((lineText) => (options.values ? splitPair(lineText) : [JSON.parse(lineText) as string]));
  await table(options.values ? ['key', 'value'] : ['key'], rows);
}

/** Keys asked for per request while following cursors. */
const PAGE_KEYS = 10_000;

/**
 * The pages of one listing as one body: text and jsonl pages simply follow each other; json pages
 * are arrays, so each page's brackets are dropped and the items joined into one array.
 */
async function* joinPages(
  pages: AsyncIterable<AsyncIterable<Uint8Array>>,
  format: 'text' | 'json' | 'jsonl',
  seen: (chunk: Buffer) => void,
): AsyncGenerator<Buffer> {
  if (format !== 'json') {
    for await (const body of pages) {
      for await (const chunk of body) {
        seen(chunk as Buffer);
        yield chunk as Buffer;
      }
    }
    return;
  }
  let pagesWithItems = 0;
  yield Buffer.from('[');
  for await (const body of pages) {
    // Hold back the page's last two bytes (its closing `]` and newline) until the page ends.
    let held = Buffer.alloc(0);
    let opened = false;
    let started = false;
    for await (const piece of body) {
      let chunk = Buffer.concat([held, piece as Buffer]);
      if (!opened) {
        if (chunk.length === 0) continue;
        chunk = chunk.subarray(1); // the page's `[`
        opened = true;
      }
      held = Buffer.from(chunk.subarray(Math.max(0, chunk.length - 2)));
      const out = chunk.subarray(0, Math.max(0, chunk.length - 2));
      if (out.length === 0) continue;
      if (!started) {
        started = true;
        if (pagesWithItems++ > 0) yield Buffer.from(',');
      }
      seen(out);
      yield Buffer.from(out);
    }
  }
  yield Buffer.from(']\n');
}

/**
 * A meta listing (jsonl objects from the server) as kvb prints it: int64 values as decimal strings
 * (jq reads JSON numbers as doubles), json as one array, text as key=value or tab-separated lines.
 * Line by line, so memory stays constant.
 */
async function* typedListing(body: AsyncIterable<Buffer>, format: 'text' | 'json' | 'jsonl'): AsyncGenerator<Buffer> {
  let pending = '';
  let first = true;
  if (format === 'json') yield Buffer.from('[');
  const emit = (lineText: string): string => {
    // text comes here only with -l (text with --values is the server's own key=value format).
    if (format === 'text') return textLine(JSON.parse(lineText) as MetaRow);
    const fixed = int64AsString(lineText);
    if (format === 'jsonl') return `${fixed}\n`;
    const out = first ? fixed : `,${fixed}`;
    first = false;
    return out;
  };
  for await (const chunk of body) {
    const lines = (pending + chunk.toString('utf8')).split('\n');
    pending = lines.pop()!;
    const out = lines
      .filter((l) => l !== '')
      .map(emit)
      .join('');
    if (out !== '') yield Buffer.from(out);
  }
  if (pending !== '') yield Buffer.from(emit(pending));
  if (format === 'json') yield Buffer.from(']\n');
}

/** The text format's escaping of a key: `\`, newline, carriage return and `=`. */
const escapeText = (s: string, isKey: boolean) =>
  s.replace(isKey ? /[\\\n\r=]/g : /[\\\n\r]/g, (c) => (c === '\n' ? '\\n' : c === '\r' ? '\\r' : `\\${c}`));

function textLine(row: MetaRow): string {
  return `${escapeText(row.key, true)}\t${row.type}\t${row.size}\t${row.expires_at ?? '-'}\t${row.rev}\n`;
}
