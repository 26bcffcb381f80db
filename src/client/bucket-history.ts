import { HISTORY_PAGE_MAX } from '../limits.js';
import { VALUE_AT_END } from './bucket-listing.js';
import type { BucketLogEntry, BucketLogOptions, HistoryEntry } from './bucket-types.js';
import type { HistoryLine, KvbHttp } from './kvb-http.js';
import { decodeJsonValue } from './typed-values.js';

/** A history line (and its text, for an int64's exact digits) as an entry; with its key in the bucket's change log. */
function historyEntry(line: HistoryLine, text: string, values: boolean | undefined): HistoryEntry | BucketLogEntry {
  const int64 = line.type === 'int64' ? VALUE_AT_END.exec(text)?.[1] : undefined;
  return {
    ...(line.key !== undefined && { key: line.key }),
    revision: line.rev,
    operation: line.operation,
    time: new Date(line.time),
    type: line.type,
    size: line.size,
    expiresAt: line.expires_at ? new Date(line.expires_at) : null,
    actor: line.actor ? { kind: line.actor.kind, tokenId: line.actor.token_id, address: line.actor.address } : null,
    ...(values && line.type !== null && { value: decodeJsonValue(line.type, line.value, int64) }),
  };
}

/** A key's recorded changes (`key`), or the bucket's change log (no key), every page of them up to `limit`. */
export async function historyPages(
  http: KvbHttp,
  id: string,
  key: string | undefined,
  options: BucketLogOptions,
): Promise<Array<HistoryEntry | BucketLogEntry>> {
  const entries: Array<HistoryEntry | BucketLogEntry> = [];
  const wanted = options.limit ?? Number.POSITIVE_INFINITY;
  const bound = (b: number | Date | undefined) => (b instanceof Date ? b.toISOString() : b === undefined ? undefined : String(b));
  let cursor: string | undefined;
  do {
    const page = await http.history(
      id,
      key,
      {
        values: options.values,
        limit: Math.min(HISTORY_PAGE_MAX, wanted - entries.length),
        cursor,
        actor: options.actor,
        prefix: options.prefix,
        since: bound(options.since),
        until: bound(options.until),
      },
      options,
    );
    for (const [i, line] of page.lines.entries()) entries.push(historyEntry(line, page.texts[i]!, options.values));
    cursor = page.nextCursor;
  } while (cursor !== undefined && entries.length < wanted);
  return entries;
}
