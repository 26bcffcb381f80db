import { prefixUpperBound } from '../values/keys.js';
import type { ListQuery } from './store.js';

/**
 * The key range of one listing page as ONE lower and ONE upper bound. The prefix and the cursor
 * position (`after`) both bound the range; given as two separate conditions on `key`, SQLite
 * seeks on one of them (the prefix) and filters the other row by row, so the page after a cursor
 * would cost O(keys before it). Merged here, a page is a seek to the position plus the page.
 */
export function listBounds(q: Pick<ListQuery, 'prefix' | 'reverse' | 'after'>): {
  lower: Buffer;
  lowerOp: '>=' | '>';
  upper: Buffer | undefined;
} {
  const prefix = Buffer.from(q.prefix);
  let lower = prefix;
  let lowerOp: '>=' | '>' = '>=';
  let upper = q.prefix ? prefixUpperBound(prefix) : undefined;
  if (q.after !== undefined) {
    const after = Buffer.from(q.after);
    if (!q.reverse) {
      if (Buffer.compare(after, prefix) >= 0) {
        lower = after;
        lowerOp = '>';
      }
    } else if (upper === undefined || Buffer.compare(after, upper) < 0) {
      upper = after;
    }
  }
  return { lower, lowerOp, upper };
}
