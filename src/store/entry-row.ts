import { isValueType } from '../values/value-type.js';
import type { Entry } from './store.js';

/** An entry as both SQL backends read it back (value and key columns are bytes). */
export interface EntryRow {
  type: string;
  value: Buffer;
  expires_at: number | null;
}

export function toEntry(row: EntryRow): Entry {
  if (!isValueType(row.type)) throw new Error(`corrupt row: unknown value type ${row.type}`);
  return { type: row.type, data: row.value, expiresAt: row.expires_at };
}

export const isLive = (row: { expires_at: number | null }, now: number) => row.expires_at === null || row.expires_at > now;
