/**
 * `kvb ls --folders [PREFIX]`: the keys directly under the prefix and each folder below it once
 * (the server's delimiter listing, which seeks past a folder instead of reading it), like `ls`
 * of a directory. Folders end with `/`.
 */
import type { KvbHttp } from '../client/kvb-http.js';
import { linesOf } from '../client/typed-values.js';
import { data, table } from './output.js';

type Item = { key: string } | { prefix: string };

const DELIMITER = '/';
/** Items asked for per request while following cursors (the server's most per answer). */
const PAGE_ITEMS = 10_000;

/** Prints the folder listing: a table at a terminal, a name per line (text), or the server's items (json, jsonl). */
export async function listFolders(
  client: KvbHttp,
  bucket: string,
  options: {
    prefix: string | undefined;
    reverse: boolean | undefined;
    limit: number | undefined;
    format: 'table' | 'text' | 'json' | 'jsonl';
  },
): Promise<void> {
  const wanted = options.limit ?? Number.POSITIVE_INFINITY;
  const items: string[] = [];
  let cursor: string | undefined;
  do {
    const page = await client.listPage(bucket, {
      prefix: options.prefix,
      reverse: options.reverse,
      delimiter: DELIMITER,
      format: 'jsonl',
      limit: Math.min(PAGE_ITEMS, wanted - items.length),
      cursor,
    });
    for await (const line of linesOf(page.body)) items.push(line);
    cursor = page.nextCursor;
  } while (cursor !== undefined && items.length < wanted);
  if (options.format === 'json') return data(`[${items.join(',')}]\n`);
  if (options.format === 'jsonl') return data(items.map((i) => `${i}\n`).join(''));
  const names = items.map((line) => {
    const item = JSON.parse(line) as Item;
    return 'prefix' in item ? item.prefix : item.key;
  });
  if (options.format === 'text') return data(names.map((n) => `${n}\n`).join(''));
  await table(
    ['key or folder/'],
    names.map((n) => [n]),
  );
}
