import { Option } from '@commander-js/extra-typings';
import { defineCommand, examples, integer } from '../define-command.js';
import { Readable } from 'node:stream';
import { data, pipe, progress, stdoutIsTty, table } from '../output.js';
import { type MetaRow, renderValuesTable } from '../values-table.js';
import { KvbHttpError, networkErrorFor } from '../../client/client-errors.js';
import { withClient } from '../session.js';

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
      .addOption(new Option('--limit <n>', 'at most this many keys (server default 10000)').argParser(integer('--limit', 0, 1_000_000)))
      .addOption(new Option('--skip <n>', 'skip this many keys first').argParser(integer('--skip', 0, Number.MAX_SAFE_INTEGER)))
      .option('--reverse', 'reverse byte order')
      .option('--values', 'include the values')
      .addOption(new Option('--folders', 'keys directly under PREFIX and each folder below it once (ending in /), like ls of a directory').conflicts(['values', 'skip']))
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
text, json and jsonl are the server's own list formats, passed through as they
stream in, so large buckets are never held in memory.

--folders asks the server for a folder listing: it seeks past each folder
instead of reading it, so a folder of millions of keys costs one lookup. json
and jsonl then print {"key":K} and {"prefix":"F/"} items; text and the table
print names, folders ending in /.
${examples('kvb ls user/', 'kvb ls --values --limit 20', "kvb ls --format jsonl --values | jq -r '.[0]'", 'kvb ls --format json | jq length', 'kvb ls --folders', 'kvb ls --folders photos/2024/')}`,
      ),
  async run(prefix, options, command) {
    await withClient(command, async ({ client, bucket }) => {
      const format = options.format ?? (stdoutIsTty() ? 'table' : 'text');
      const id = bucket();
      if (options.folders) {
        const { listFolders } = await import('../ls-folders.js');
        return listFolders(client, id, { prefix, reverse: options.reverse, limit: options.limit, format });
      }
      const wanted = options.limit ?? Number.POSITIVE_INFINITY;
      const query = { prefix, reverse: options.reverse, values: options.values };
      /**
       * Every page of the listing, following Kvb-Next-Cursor until the last page or --limit:
       * each page streams through as it arrives, so memory stays constant however many keys.
       */
      async function* pages(pageFormat: 'text' | 'json' | 'jsonl', meta?: boolean): AsyncGenerator<AsyncIterable<Uint8Array>> {
        let cursor: string | undefined;
        let listed = 0;
        let first = true;
        do {
          const limit = Math.min(PAGE_KEYS, wanted - listed);
          const page = await client.listPage(id, { ...query, meta, format: pageFormat, limit, skip: first ? options.skip : undefined, cursor });
          first = false;
          yield page.body;
          listed += limit;
          cursor = page.nextCursor;
        } while (cursor !== undefined && listed < wanted);
      }
      const shown = progress('listed');
      let keys = 0;
      let bytes = 0;
      const count = (chunk: Buffer) => {
        bytes += chunk.length;
        for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, i + 1)) keys++;
        shown.update(keys, bytes);
      };
      try {
        if (format !== 'table') {
          // A connection lost mid-listing is still a network failure (exit 4), not a crash.
          await pipe(Readable.from(joinPages(pages(format), format, count))).catch((err: unknown) => {
            if (err instanceof KvbHttpError) throw err;
            throw networkErrorFor(client.url, err);
          });
          return;
        }
        // A table is for people: read it whole, then lay it out. With values, each key comes with
        // its type, size and expiry (the listing's meta=true) for a one-line-per-key table.
        const chunks: Buffer[] = [];
        try {
          for await (const chunk of joinPages(pages('jsonl', options.values), 'jsonl', count)) chunks.push(chunk);
        } catch (err) {
          if (err instanceof KvbHttpError) throw err;
          throw networkErrorFor(client.url, err);
        }
        shown.done();
        const lines = Buffer.concat(chunks)
          .toString('utf8')
          .split('\n')
          .filter((lineText) => lineText !== '');
        // A server without the meta extension answers [key, value] pairs: the older bordered table.
        if (options.values && (lines.length === 0 || lines[0]!.startsWith('{'))) {
          await data(renderValuesTable(lines.map((lineText) => JSON.parse(lineText) as MetaRow), process.stdout.columns || 80, Date.now()));
          return;
        }
        const rows = lines.map((lineText) => (options.values ? splitPair(lineText) : [JSON.parse(lineText) as string]));
        await table(options.values ? ['key', 'value'] : ['key'], rows);
      } finally {
        shown.done();
      }
    });
  },
});

/** Keys asked for per request while following cursors. */
const PAGE_KEYS = 10_000;

/**
 * The pages of one listing as one body: text and jsonl pages simply follow each other; json pages
 * are arrays, so each page's brackets are dropped and the items joined into one array.
 */
async function* joinPages(pages: AsyncIterable<AsyncIterable<Uint8Array>>, format: 'text' | 'json' | 'jsonl', seen: (chunk: Buffer) => void): AsyncGenerator<Buffer> {
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
