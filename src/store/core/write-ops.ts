/**
 * Every key write the server makes, as plain data: no closures and nothing but strings, numbers,
 * bigints, Buffers, arrays and Maps, so a batch of them can be posted to another thread. One
 * module (apply-batch.ts) gives them their meaning; an engine only loads what they read and
 * persists what they did.
 */
import type { ParsedNumber } from '../../values/numbers.js';
import type { StoredValue } from '../../values/stored-value.js';
import { type Actor, SERVER_ACTOR } from '../history-types.js';
import type { CommitOutcome, Condition, Deleted, Entry, Refusal, TxnRequestOp, Written } from './write-types.js';

/** What every write carries: its clock (ms; decides which rows are live), its precondition, its author. */
interface WriteCommon {
  /** The write's clock: a row expiring at or before it is absent to the write. */
  now: number;
  /** Recorded on the change rows the write makes (history); none recorded when absent. */
  actor?: Actor | undefined;
}

/** Sets one key to a value. */
export interface SetOp extends WriteCommon {
  op: 'set';
  key: string;
  value: StoredValue;
  expiresAt: number | null;
  condition?: Condition | undefined;
}

/** Deletes one key; an absent or expired one is not deleted, and nothing is written. */
export interface DeleteOp extends WriteCommon {
  op: 'delete';
  key: string;
  condition?: Condition | undefined;
}

/**
 * Adds `delta` to a key's number (absent: starts from `delta`). The expiry is `expiresAt`, or,
 * with `keepExpiry`, the live key's own (a key it creates still gets `expiresAt`).
 */
export interface CounterOp extends WriteCommon {
  op: 'counter';
  key: string;
  delta: ParsedNumber;
  expiresAt: number | null;
  keepExpiry: boolean;
  condition?: Condition | undefined;
}

/**
 * The live keys each prefix delete of a transaction found when an engine listed them ahead of its
 * batch, at bucket revision `at`: valid only while the bucket is still at `at`.
 */
export interface PrefixListing {
  at: number;
  under: Map<string, string[]>;
}

/**
 * A transaction: every check, read and write of `ops` at one revision, or nothing. A rollback is
 * one too (`operation: 'rollback'` and the revision it was planned against, `expectRevision`).
 */
export interface CommitOp extends WriteCommon {
  op: 'commit';
  ops: TxnRequestOp[];
  expectRevision?: number | undefined;
  operation?: 'transaction' | 'rollback' | undefined;
  /** Prefix deletes' keys as listed by the engine; without it the rules list them from the view. */
  listed?: PrefixListing | undefined;
}

/**
 * Removes whichever of `keys` have expired by `now` (the expiry sweep): one revision for all of
 * them, an `expire` change row each; a key written meanwhile (live again, or gone) is left alone.
 * The sweeper finds the keys; the rule decides, inside the write, which still expire.
 */
export interface SweepOp extends WriteCommon {
  op: 'sweep';
  keys: string[];
}

/** The sweep writes for expired rows found by an engine (bucket id, key): one per bucket, made by the server. */
export function sweepsOf(expired: Array<{ bucket_id: string; key: Buffer }>, now: number): Array<{ bucket: string; op: SweepOp }> {
  const byBucket = new Map<string, string[]>();
  for (const { bucket_id, key } of expired) {
    const keys = byBucket.get(bucket_id);
    if (keys) keys.push(key.toString('utf8'));
    else byBucket.set(bucket_id, [key.toString('utf8')]);
  }
  return [...byBucket].map(([bucket, keys]) => ({ bucket, op: { op: 'sweep', keys, now, actor: SERVER_ACTOR } }));
}

/** What a counter adds and how it sets the expiry: a CounterOp without its key, clock, condition and author. */
export type CounterUpdate = Pick<CounterOp, 'op' | 'delta' | 'expiresAt' | 'keepExpiry'>;

export type WriteOp = SetOp | DeleteOp | CounterOp | CommitOp | SweepOp;

/** Each write's answer when it ran. */
export interface WriteResults {
  set: Written | Refusal;
  delete: Deleted | Refusal;
  counter: Entry | Refusal;
  commit: CommitOutcome;
  /** How many keys the sweep removed (or the bucket is gone). */
  sweep: { swept: number } | Refusal;
}

export type ResultOf<O extends WriteOp> = WriteResults[O['op']];

/**
 * One write's outcome in a batch: its answer, the error it failed with (it changed nothing), or,
 * for a commit with a `listed` that the bucket has moved past, `stale`: list again and retry.
 */
export type OpOutcome = { ok: true; value: WriteResults[WriteOp['op']] } | { ok: false; error: unknown } | { ok: false; stale: true };
