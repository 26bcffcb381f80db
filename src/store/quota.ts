import { KvbError } from '../errors.js';

/** Per-bucket quotas (`--max-keys-per-bucket`, `--max-bytes-per-bucket`); 0 means no limit. */
export interface Quota {
  maxKeys: number;
  maxBytes: number;
}

/**
 * What a bucket stores: keys (expired ones count until the sweeper removes them) and bytes, the
 * sum of each key's and value's length in bytes.
 */
export interface Usage {
  keys: number;
  bytes: number;
}

export const NO_QUOTA: Quota = { maxKeys: 0, maxBytes: 0 };

/** Whether any limit is set: without one a write need not know its bucket's usage. */
export const quotaSet = (quota: Quota): boolean => quota.maxKeys > 0 || quota.maxBytes > 0;

/** The bytes one stored key counts: its key (UTF-8) and its value (the statements' ENTRY_SIZE). */
export const entrySize = (key: Buffer | string, value: Buffer): number =>
  (typeof key === 'string' ? Buffer.byteLength(key) : key.length) + value.length;

/**
 * Refuses (507) a write that takes a bucket over its quota. Only growth is refused: a write that
 * shrinks usage, or replaces a key with one no larger, always passes, even over a lowered quota.
 */
export function checkQuota(quota: Quota, before: Usage, delta: Usage): void {
  if (quota.maxKeys > 0 && delta.keys > 0 && before.keys + delta.keys > quota.maxKeys) {
    throw new KvbError(
      'insufficient_storage',
      `over this bucket's quota of ${quota.maxKeys} keys (it holds ${before.keys}; the write adds ${delta.keys}); delete keys to make room`,
    );
  }
  if (quota.maxBytes > 0 && delta.bytes > 0 && before.bytes + delta.bytes > quota.maxBytes) {
    throw new KvbError(
      'insufficient_storage',
      `over this bucket's quota of ${quota.maxBytes} bytes (it holds ${before.bytes}; the write adds ${delta.bytes}); delete keys to make room`,
    );
  }
}
