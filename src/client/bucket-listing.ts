import type { KvbHttp } from './kvb-http.js';
import type { ListOptions, ListedEntry, Listing } from './bucket-types.js';
import { type ValueType, decodeJsonValue, linesOf } from './typed-values.js';

/** A meta listing line's value: the last field, as the server wrote it (JSON compacted, numbers as stored). */
export const VALUE_AT_END = /,"value":(.*)\}$/s;

/** `KvbBucket.list`: every key in byte order (or reversed), following cursors; with `values: true`, each key's entry. */
export function listBucket(http: KvbHttp, id: string, options: ListOptions): Listing<{ key: string } | ListedEntry> {
  const pageSize = options.pageSize ?? 1000;
  const wanted = options.limit ?? Number.POSITIVE_INFINITY;
  const listing = {
    revision: undefined as number | undefined,
    async *[Symbol.asyncIterator]() {
      let cursor: string | undefined;
      let listed = 0;
      do {
        const page = await http.listPage(
          id,
          {
            prefix: options.prefix,
            reverse: options.reverse,
            values: options.values,
            meta: options.values,
            format: 'jsonl',
            limit: Math.min(pageSize, wanted - listed),
            cursor,
            revision: options.revision,
          },
          options,
        );
        listing.revision ??= page.revision;
        for await (const line of linesOf(page.body)) {
          listed++;
          if (!options.values) {
            yield { key: JSON.parse(line) as string };
            continue;
          }
          const row = JSON.parse(line) as { key: string; type: ValueType; size: number; expires_at: string | null; value: unknown };
          // Numbers are JSON numbers in a listing: keep their exact text, not the rounded double.
          const source = VALUE_AT_END.exec(line)?.[1];
          const text = row.type === 'bytes' ? null : row.type === 'text' ? String(row.value) : (source ?? JSON.stringify(row.value));
          yield {
            key: row.key,
            value: decodeJsonValue(row.type, row.value, row.type === 'int64' ? source : undefined),
            type: row.type,
            text,
            size: row.size,
            expiresAt: row.expires_at ? new Date(row.expires_at) : null,
          };
        }
        cursor = page.nextCursor;
      } while (cursor !== undefined && listed < wanted);
    },
  };
  return listing;
}
