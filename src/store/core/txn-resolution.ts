/**
 * The transaction operations that read before they write (`get`, `expire`, `delete_prefix`),
 * turned into the plain checks, sets and deletes every store already commits. Pure: a store reads
 * what `readsOf` names inside its write transaction (so nothing can change in between), then
 * `resolveTransaction` decides the outcome from those reads. Every store thus gives these
 * operations the same meaning.
 */
import { KvbError } from '../../errors.js';
import { MAX_PREFIX_DELETE_KEYS } from '../../limits.js';
import type { Entry, OpResult, TxnOp, TxnRequestOp } from './write-types.js';
import { checkHolds } from './conditions.js';

/**
 * Refuses (400) a transaction whose prefix deletes repeat or overlap: one prefix equal to, or a
 * prefix of, another's. Either would list and delete the same keys again (the same prefix 1,000
 * times multiplied one listing a thousandfold); each key is deleted by one prefix delete at most.
 * Sorted once, a prefix that covers others is followed by one it covers, so neighbours suffice.
 * (Sets and deletes of single keys under a deleted prefix stay legal: "clear, then write" is one
 * transaction, and the 1,000-operation bound already limits them.)
 */
export function checkPrefixDeletes(ops: TxnRequestOp[]): void {
  const prefixes = ops.flatMap((op, i) => (op.op === 'delete_prefix' ? [{ prefix: op.key, i }] : []));
  if (prefixes.length < 2) return;
  prefixes.sort((a, b) => (a.prefix < b.prefix ? -1 : a.prefix > b.prefix ? 1 : a.i - b.i));
  for (let n = 1; n < prefixes.length; n++) {
    const outer = prefixes[n - 1]!;
    const inner = prefixes[n]!;
    if (!inner.prefix.startsWith(outer.prefix)) continue;
    const [first, second] = outer.i < inner.i ? [outer, inner] : [inner, outer];
    const how = outer.prefix === inner.prefix ? 'repeats' : 'overlaps';
    throw new KvbError(
      'bad_request',
      `txn[${second.i}]: prefix ${JSON.stringify(second.prefix)} ${how} txn[${first.i}]'s prefix ${JSON.stringify(first.prefix)}; a transaction deletes each key by one prefix delete at most (keep the shorter prefix)`,
    );
  }
}

/**
 * The listing of a transaction's prefix deletes, bounded here for every engine: each step asks
 * for up to `limit` live keys under `prefix` and is sent them back; the result maps each prefix
 * listed to its keys. A prefix gets what is left of the transaction's bound, plus one so that
 * passing it is seen (resolveTransaction then refuses the transaction), and listing stops there,
 * so the reads are bounded as well as the deletes. A generator, so that an engine that lists
 * synchronously (a batch's view) and one that lists with round trips share the bound.
 */
export function* prefixListing(prefixes: string[]): Generator<{ prefix: string; limit: number }, Map<string, string[]>, string[]> {
  const under = new Map<string, string[]>();
  let listed = 0;
  for (const prefix of prefixes) {
    if (listed > MAX_PREFIX_DELETE_KEYS) break;
    const keys = yield { prefix, limit: Math.max(0, MAX_PREFIX_DELETE_KEYS - listed) + 1 };
    under.set(prefix, keys);
    listed += keys.length;
  }
  return under;
}

/**
 * Refuses (400) a transaction whose prefix deletes hold more than MAX_PREFIX_DELETE_KEYS keys
 * together, naming the operation that passes the bound. It needs only the listing (`under`, as
 * prefixListing bounds it), so an engine that lists before its write can refuse before any of
 * the write's work; resolveTransaction applies it again for the engines that list inside it.
 */
export function checkPrefixDeleteBound(ops: TxnRequestOp[], under: Map<string, string[]>): void {
  let prefixDeletes = 0;
  for (const [i, op] of ops.entries()) {
    if (op.op !== 'delete_prefix') continue;
    const keys = under.get(op.key) ?? [];
    prefixDeletes += keys.length;
    if (prefixDeletes <= MAX_PREFIX_DELETE_KEYS) continue;
    const what =
      prefixDeletes === keys.length
        ? `prefix ${JSON.stringify(op.key)} holds`
        : `the prefix deletes up to this one's (prefix ${JSON.stringify(op.key)}) hold`;
    throw new KvbError(
      'bad_request',
      `txn[${i}]: ${what} more than ${MAX_PREFIX_DELETE_KEYS} keys, the most one transaction deletes by prefix; delete them in parts (longer prefixes, several transactions)`,
    );
  }
}

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
  checkPrefixDeleteBound(ops, under);
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
  // From the end: the first write met on a key is its last (one set lookup per write, no deletes).
  const seen = new Set<string>();
  const last: TxnOp[] = [];
  for (let i = writes.length - 1; i >= 0; i--) {
    const op = writes[i]!;
    if (seen.has(op.key)) continue;
    seen.add(op.key);
    last.push(op);
  }
  return last.reverse();
}
