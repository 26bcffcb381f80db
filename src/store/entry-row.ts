import { isValueType } from '../values/value-type.js';
import type { Entry, EntryMeta } from './core/write-types.js';

/** An entry as both SQL backends read it back (value and key columns are bytes). */
export interface EntryRow {
  type: string;
  value: Buffer;
  expires_at: number | null;
  revision: number;
  create_revision: number;
}

export function toEntry(row: EntryRow): Entry {
  if (!isValueType(row.type)) throw new Error(`corrupt row: unknown value type ${row.type}`);
  return {
    type: row.type,
    data: row.value,
    expiresAt: row.expires_at,
    revision: Number(row.revision),
    createRevision: Number(row.create_revision),
  };
}

/** A `meta` listing's row: the entry's columns with the value's byte length in place of the value. */
export interface MetaRow {
  type: string;
  size: number;
  expires_at: number | null;
  revision: number;
}

export function toMeta(row: MetaRow): EntryMeta {
  if (!isValueType(row.type)) throw new Error(`corrupt row: unknown value type ${row.type}`);
  return { type: row.type, size: Number(row.size), expiresAt: row.expires_at, revision: Number(row.revision) };
}

export const isLive = (row: { expires_at: number | null }, now: number) => row.expires_at === null || row.expires_at > now;
