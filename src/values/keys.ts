import { badRequest } from '../errors.js';
import { MAX_KEY_BYTES } from '../limits.js';

/** The words every refusal of a too-large value uses, naming the limit and how it is set. */
export function valueTooLarge(size: number | undefined, limit: number): string {
  const kib = limit % 1024 === 0 ? ` (${limit / 1024} KiB)` : '';
  return `${size === undefined ? 'the value' : `the value (${size} bytes)`} is larger than the server's limit of ${limit} bytes${kib}, set by kvb serve --max-value-bytes`;
}

/** Percent-decodes a key exactly once; malformed escapes or invalid UTF-8 are a 400. */
export function decodeKey(encoded: string): string {
  let key: string;
  try {
    key = decodeURIComponent(encoded);
  } catch {
    throw badRequest('key has malformed percent-encoding');
  }
  return checkKey(key);
}

/** Validates a decoded key: 1 to 128 UTF-8 bytes, well-formed Unicode. Returns it. */
export function checkKey(key: unknown, what = 'key'): string {
  if (typeof key !== 'string') throw badRequest(`${what} must be a string`);
  if (key.length === 0) throw badRequest(`${what} is empty`);
  if (!key.isWellFormed()) throw badRequest(`${what} is not well-formed Unicode`);
  if (Buffer.byteLength(key, 'utf8') > MAX_KEY_BYTES) throw badRequest(`${what} is longer than ${MAX_KEY_BYTES} bytes`);
  return key;
}

/**
 * The smallest byte string greater than every string starting with `prefix` (for an indexed
 * range scan `key >= prefix AND key < upper`), or undefined when no such bound exists.
 */
export function prefixUpperBound(prefix: Buffer): Buffer | undefined {
  const upper = Buffer.from(prefix);
  for (let i = upper.length - 1; i >= 0; i--) {
    if (upper[i]! < 0xff) {
      upper[i]! += 1;
      return upper.subarray(0, i + 1);
    }
  }
  return undefined;
}
