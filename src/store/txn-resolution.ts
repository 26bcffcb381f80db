/**
 * The transaction operations that read before they write (`get`, `expire`, `delete_prefix`),
 * turned into the plain checks, sets and deletes every store already commits. Pure: a store reads
 * what `readsOf` names inside its write transaction (so nothing can change in between), then
 * `resolveTransaction` decides the outcome from those reads. Every store thus gives these
 * operations the same meaning.
 */
import { KvbError } from '../errors.js';
import { type Entry, type OpResult, type TxnOp, type TxnRequestOp, checkHolds } from './store.js';

/** Most keys one `delete_prefix` removes in its one revision; past it the transaction is refused (400), nothing written. */
export const MAX_PREFIX_DELETE_KEYS = 50_000;

/** The keys whose live entries and the prefixes whose live keys a transaction needs read. */
export function readsOf(ops: TxnRequestOp[]): { keys: string[]; prefixes: string[] } {
  const keys = new Set<string>();
  const prefixes = new Set<string>();
  for (const op of ops) {
    if (op.op === 'delete_prefix') prefixes.add(op.key);
    else if (op.op !== 'set' && op.op !== 'delete') keys.add(op.key);
  }
  return { keys: [...keys], prefixes: [...prefixes] };
}

export interface Resolution {
  /** Indices (in the request) of the checks and expires that failed. */
  failed: number[];
  /** The writes to commit, in request order (a later write on a key wins). */
  writes: TxnOp[];
  /** One per request operation. */
  results: OpResult[];
  /** Whether any operation reports something (the route then answers with a body). */
  reports: boolean;
}

/**
 * Decides a transaction from the reads `readsOf` asked for: `entries` maps each key to its live
 * entry (absent when not live), `under` each prefix to its live keys.
 */
export function resolveTransaction(ops: TxnRequestOp[], entries: Map<string, Entry>, under: Map<string, string[]>): Resolution {
  const failed: number[] = [];
  const writes: TxnOp[] = [];
  const results: OpResult[] = [];
  let reports = false;
  ops.forEach((op, i) => {
    let result: OpResult;
    switch (op.op) {
      case 'set':
      case 'delete':
        writes.push(op);
        break;
      case 'check':
        if (!checkHolds(op, entries.get(op.key))) failed.push(i);
        break;
      case 'get':
        result = { op: 'get', key: op.key, entry: entries.get(op.key) };
        reports = true;
        break;
      case 'expire': {
        const current = entries.get(op.key);
        if (!current) failed.push(i);
        else writes.push({ op: 'set', key: op.key, value: { type: current.type, data: current.data }, expiresAt: op.expiresAt });
        break;
      }
      case 'delete_prefix': {
        const keys = under.get(op.key) ?? [];
        if (keys.length > MAX_PREFIX_DELETE_KEYS) {
          throw new KvbError('bad_request', `txn[${i}]: prefix ${JSON.stringify(op.key)} holds more than ${MAX_PREFIX_DELETE_KEYS} keys; delete it in parts (longer prefixes)`);
        }
        for (const key of keys) writes.push({ op: 'delete', key });
        result = { op: 'delete_prefix', deleted: keys.length };
        reports = true;
        break;
      }
    }
    results.push(result);
  });
  return { failed, writes, results, reports };
}

/**
 * A transaction's writes reduced to the last one on each key (in the order of those last writes):
 * writes are blind, so the last decides the key's state. A key set after a delete in the same
 * transaction was never absent at any revision, so it keeps its create revision like any set
 * over a live value; every store applies these, so both agree.
 */
export function lastWritePerKey(writes: TxnOp[]): TxnOp[] {
  const last = new Map<string, TxnOp>();
  for (const op of writes) {
    last.delete(op.key);
    last.set(op.key, op);
  }
  return [...last.values()];
}
