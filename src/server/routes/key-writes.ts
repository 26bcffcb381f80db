/**
 * The store operation each one-key write asks for, from what its request said: one definition
 * for the key routes (key-routes.ts) and the write lane (write-lane.ts), which must ask the
 * store for exactly the same thing.
 */
import { badRequest } from '../../errors.js';
import type { Actor } from '../../store/history-types.js';
import type { CounterOp, DeleteOp, SetOp } from '../../store/core/write-ops.js';
import type { Condition } from '../../store/store.js';
import { type ParsedNumber, parseDelta } from '../../values/numbers.js';
import { inferValue } from '../../values/infer-value.js';
import type { CachedBucket } from '../bucket-cache.js';
import { expiryFor } from '../request-input.js';

/** What every one-key write names: its key and bucket, `?ttl` (seconds), its precondition, its author. */
export interface KeyWrite {
  key: string;
  bucket: CachedBucket;
  ttl: number | undefined;
  condition: Condition | undefined;
  actor: Actor;
}

/** A set of the body, typed by its Content-Type (a 400 when it breaks its type's promise). */
export function setOp(write: KeyWrite, body: Buffer, contentType: string | undefined, now: number): SetOp {
  const { key, bucket, ttl, condition, actor } = write;
  const value = inferValue(body, contentType);
  return { op: 'set', key, value, expiresAt: expiryFor(ttl ?? bucket.record.defaultTtl, now), now, condition, actor };
}

/** A counter's delta, from its body: `+N` or `-N` (a 400 otherwise). */
export function counterDelta(body: string): ParsedNumber {
  const delta = parseDelta(body);
  if (!delta) throw badRequest('delta must be +N or -N with N a decimal number');
  return delta;
}

export function counterOp(write: KeyWrite, delta: ParsedNumber, now: number): CounterOp {
  const { key, bucket, ttl, condition, actor } = write;
  // Without ?ttl a counter keeps its key's expiry; a key it creates gets the bucket's default.
  const expiresAt = expiryFor(ttl ?? bucket.record.defaultTtl, now);
  return { op: 'counter', key, delta, expiresAt, keepExpiry: ttl === undefined, now, condition, actor };
}

export function deleteOp(write: Omit<KeyWrite, 'ttl'>, now: number): DeleteOp {
  return { op: 'delete', key: write.key, now, condition: write.condition, actor: write.actor };
}
