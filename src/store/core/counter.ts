import { badRequest } from '../../errors.js';
import { type ParsedNumber, addNumbers, formatNumber, parseNumber } from '../../values/numbers.js';
import { minifyJson } from '../../values/json-source.js';
import type { Entry, NewEntry } from './write-types.js';
import type { CounterOp } from './write-ops.js';

/** The numeric value of a stored entry, for the counter; undefined when it is not a number. */
function numericValue(entry: Entry): ParsedNumber | undefined {
  if (entry.type === 'int64' || entry.type === 'float64') return parseNumber(entry.data.toString('utf8'));
  if (entry.type === 'json') return parseNumber(minifyJson(entry.data.toString('utf8')));
  return undefined;
}

/** What a counter writes over the key's live entry (undefined: absent); throws 400 when it cannot add. */
export function counterEntry(op: CounterOp, current: Entry | undefined): NewEntry {
  let next = op.delta;
  if (current) {
    const value = numericValue(current);
    if (!value) throw badRequest(`stored value is ${current.type}, not a number`);
    const sum = addNumbers(value, op.delta);
    if (!sum.ok) throw badRequest(sum.reason);
    next = sum.value;
  }
  const expiresAt = op.keepExpiry && current ? current.expiresAt : op.expiresAt;
  return { type: next.kind, data: Buffer.from(formatNumber(next)), expiresAt };
}
