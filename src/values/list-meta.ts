import type { StoredValue } from './stored-value.js';
import type { ValueType } from './value-type.js';
import { valueAsJson } from './list-format.js';

/** What a metadata listing says about a key besides its name (the store's EntryMeta). */
export interface ListMeta {
  type: ValueType;
  /** The stored value's length in bytes. */
  size: number;
  expiresAt: number | null;
  revision: number;
}

/**
 * One listed key with its metadata (`?meta=true`): a JSON object
 * `{"key","type","size","expires_at","rev"}`, plus `"value"` when the value is given
 * (`&values=true`). `size` is the stored value's length in bytes, `expires_at` RFC 3339 (UTC) or
 * null, `rev` the key's revision, and `value` is encoded as in every JSON listing (valueAsJson:
 * JSON as is, numbers as numbers, text as a string, bytes as base64 text).
 */
export function formatListMeta(key: string, meta: ListMeta, value?: StoredValue): string {
  const expires = meta.expiresAt === null ? 'null' : JSON.stringify(new Date(meta.expiresAt).toISOString());
  const head = `{"key":${JSON.stringify(key)},"type":"${meta.type}","size":${meta.size},"expires_at":${expires},"rev":${meta.revision}`;
  return value ? `${head},"value":${valueAsJson(value)}}` : `${head}}`;
}
