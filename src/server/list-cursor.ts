import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { BucketRecord } from '../store/store.js';
import { badRequest } from '../errors.js';

/** Where a listing stops and how it continues: the last key sent, bound to bucket, prefix and direction. */
export interface CursorPosition {
  prefix: string;
  reverse: boolean;
  lastKey: string;
}

const VERSION = 1;
const MAC_BYTES = 16;

/**
 * The MAC key of a bucket's cursors, derived from what every instance sharing the store reads
 * from the same bucket row and no client ever sees: its credential hashes (salted scrypt) and
 * signing key. So a cursor minted by one instance is accepted by another, with no secret to
 * configure. Rotating a credential invalidates the bucket's outstanding cursors (400), like a
 * token. A bucket with no credential at all has nothing secret to derive from: there the MAC only
 * catches altered cursors, and a forged one gains nothing, since anyone may list that bucket.
 * Whatever the MAC, a cursor is only a position: it must name the request's own prefix and
 * direction, and its key must lie inside that prefix, so it can never widen a token's reach.
 */
function macKey(bucket: BucketRecord): Buffer {
  const hash = createHash('sha256').update('kvb list cursor v1\0').update(bucket.id);
  for (const part of [bucket.secretKeyHash, bucket.readKeyHash, bucket.writeKeyHash, bucket.signingKey]) {
    hash.update('\0').update(part ?? '-');
  }
  return hash.digest();
}

function mac(bucket: BucketRecord, payload: string): Buffer {
  return createHmac('sha256', macKey(bucket)).update(payload).digest().subarray(0, MAC_BYTES);
}

/** An opaque, URL-safe cursor for `position` in `bucket`. */
export function encodeCursor(bucket: BucketRecord, position: CursorPosition): string {
  const payload = Buffer.from(JSON.stringify([VERSION, bucket.id, position.prefix, position.reverse ? 1 : 0, position.lastKey])).toString(
    'base64url',
  );
  return `${payload}.${mac(bucket, payload).toString('base64url')}`;
}

/**
 * The key a cursor continues after, once it is shown to be this bucket's and to match the
 * request's prefix and direction; anything else is a 400.
 */
export function decodeCursor(bucket: BucketRecord, cursor: string, expected: { prefix: string; reverse: boolean }): string {
  const invalid = (why: string) => badRequest(`cursor is not valid here: ${why}`);
  const dot = cursor.indexOf('.');
  if (dot <= 0 || cursor.length > 1024 || !/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/.test(cursor)) throw invalid('malformed');
  const payload = cursor.slice(0, dot);
  const given = Buffer.from(cursor.slice(dot + 1), 'base64url');
  const wanted = mac(bucket, payload);
  if (given.length !== wanted.length || !timingSafeEqual(given, wanted)) {
    throw invalid('altered, or issued for another bucket or before its credentials changed');
  }
  let fields: unknown;
  try {
    fields = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
  } catch {
    throw invalid('malformed');
  }
  if (!Array.isArray(fields) || fields.length !== 5 || fields[0] !== VERSION) throw invalid('unknown version');
  const [, id, prefix, reverse, lastKey] = fields as [number, unknown, unknown, unknown, unknown];
  if (id !== bucket.id) throw invalid('issued for another bucket');
  if (prefix !== expected.prefix) throw invalid('issued for another prefix');
  if (reverse !== (expected.reverse ? 1 : 0)) throw invalid('issued for the other direction');
  if (typeof lastKey !== 'string' || !lastKey.startsWith(expected.prefix)) throw invalid('position outside the prefix');
  return lastKey;
}
