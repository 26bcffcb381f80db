import type { Op, Verdict } from '../history.js';
import { type KeyOperation, type KeyState, initialKeyState, keyOperation, keyStateId } from './key-model.js';
import { describeOp } from './describe-op.js';

/**
 * Linearizability, key by key: is there one order of the operations on a key, each taking effect
 * at one instant between its call and its return, in which every answer is the one the key's
 * sequential model (key-model.ts) gives? A single key is enough (P-compositionality: a history
 * is linearizable iff each object's sub-history is, Herlihy & Wing 1990), and it keeps every
 * search small.
 *
 * The search is Wing & Gong's (1993) depth-first search over the history with Lowe's (2017)
 * memoisation, the algorithm Porcupine and Knossos use: calls and returns sorted by time in a
 * doubly linked list; the calls before the first return still in it are the candidates, and one
 * whose operation the model accepts in the current state is linearized (its call and return
 * lifted out of the list) and the candidates taken anew; when none is left, the operation of that
 * first return cannot be linearized in time, so the last choice is undone (unlifted) and the next
 * candidate tried. A configuration (the set of operations linearized, the state) already explored
 * is never explored again.
 *
 * Indeterminate operations (`unknown`: it may have taken effect at any moment after its call, or
 * never) have a call and no return: the search may linearize them anywhere after their call and
 * succeeds once every determinate operation is linearized. A configuration is also skipped when
 * one with the same determinate set and state, and a subset of its indeterminate operations, was
 * explored: having fewer optional operations left can only offer fewer ways on. One bounded by
 * its process's death (`until`, process-lives.ts) has that death as its return, and is settled by
 * then either way: linearized with its effect, or without any.
 *
 * The search is exponential in the worst case, so each key gets a budget; a key that runs out
 * makes the whole verdict `unchecked` (never ok) unless another key shows an anomaly. An anomaly
 * names the key and the shortest prefix of its history (in call/return order) that has no
 * linearization, as Porcupine reports the longest one that has: operations cut off by the prefix
 * count as indeterminate there.
 */
/**
 * The search's allowance per key (and as much again to find the shortest failing prefix): time
 * for a real run, or a number of steps, so that a verdict depends only on the history and never
 * on how busy the machine is (the checkers' own tests use steps).
 */
export type LinearizabilityOptions = ({ budgetMs: number } | { budgetSteps: number }) & {
  /** What the search's cache may hold per key, in bytes (default MAX_CACHE_BYTES). */
  maxCacheBytes?: number;
};

/** One key's allowance being spent: `exhausted` is asked every STEPS_PER_LOOK steps. */
class Allowance {
  private readonly deadline: number;
  private stepsLeft: number;
  constructor(private readonly options: LinearizabilityOptions) {
    this.deadline = 'budgetMs' in options ? performance.now() + options.budgetMs : Number.POSITIVE_INFINITY;
    this.stepsLeft = 'budgetSteps' in options ? options.budgetSteps : Number.POSITIVE_INFINITY;
  }
  get maxCacheBytes(): number {
    return this.options.maxCacheBytes ?? MAX_CACHE_BYTES;
  }
  exhausted(steps: number): boolean {
    this.stepsLeft -= steps;
    return this.stepsLeft <= 0 || (this.deadline !== Number.POSITIVE_INFINITY && performance.now() >= this.deadline);
  }
  describe(): string {
    return 'budgetMs' in this.options ? `${this.options.budgetMs} ms` : `${this.options.budgetSteps} steps`;
  }
}

const CHECKER = 'linearizability';
/** How many search steps run between two looks at the allowance (and the clock). */
const STEPS_PER_LOOK = 256;
const MAX_LISTED_OPS = 40;
/**
 * What the search's cache may hold, in bytes (estimated: each entry's bitset plus about 320 bytes
 * of Map entry, id string and typed array): a history whose search would need more is `unchecked`
 * with that reason, never a crash of the checker (Node's default heap is about 4 GB here).
 */
const MAX_CACHE_BYTES = 1_500_000_000;
const CACHE_ENTRY_BYTES = 320;

export function checkLinearizable(ops: Op[], options: LinearizabilityOptions): Verdict {
  const multiKeyGroups = groupsOfSeveralKeys(ops);
  const byKey = new Map<string, Op[]>();
  for (const op of ops) {
    const list = byKey.get(op.key);
    if (list) list.push(op);
    else byKey.set(op.key, [op]);
  }
  const anomalies: string[] = [];
  const unchecked: string[] = [];
  let examined = 0;
  for (const key of [...byKey.keys()].sort()) {
    const keyOps = byKey.get(key) ?? [];
    const prepared: Array<{ op: Op; operation: KeyOperation }> = [];
    for (const op of keyOps) {
      const operation = keyOperation(op, multiKeyGroups);
      if (operation) prepared.push({ op, operation });
    }
    examined += prepared.length;
    const allowance = new Allowance(options);
    const result = search(
      prepared.map((p) => p.operation),
      prepared.map((p) => p.op),
      allowance,
    );
    if (result.kind === 'budget') {
      unchecked.push(
        `key ${JSON.stringify(key)}: search ran out of its budget (${result.memory ? `${allowance.maxCacheBytes} bytes of cache` : allowance.describe()}) after ${result.steps} steps on ${prepared.length} operations (${keyOps.length} recorded); not checked`,
      );
    } else if (result.kind === 'fail') {
      anomalies.push(
        ...explainFailure(
          key,
          prepared.map((p) => p.op),
          multiKeyGroups,
          new Allowance(options),
        ),
      );
    }
  }
  if (anomalies.length > 0) return { checker: CHECKER, result: 'anomaly', details: [...anomalies, ...unchecked], examined };
  if (unchecked.length > 0) return { checker: CHECKER, result: 'unchecked', details: unchecked, examined };
  return { checker: CHECKER, result: 'ok', details: [], examined };
}

/** Groups that wrote more than one key: a refusal of such a request may come from any of its checks. */
function groupsOfSeveralKeys(ops: Op[]): Set<number> {
  const keysOf = new Map<number, Set<string>>();
  for (const op of ops) {
    if (op.group === undefined) continue;
    const keys = keysOf.get(op.group) ?? new Set<string>();
    keys.add(op.key);
    keysOf.set(op.group, keys);
  }
  return new Set([...keysOf].filter(([, keys]) => keys.size > 1).map(([group]) => group));
}

interface Entry {
  readonly isCall: boolean;
  /** Index of the operation in the search's arrays. */
  readonly index: number;
  readonly time: number;
  /** For a call: its return, null for an indeterminate operation. */
  match: Entry | null;
  prev: Entry | null;
  next: Entry | null;
}

type SearchResult = { kind: 'ok' } | { kind: 'fail' } | { kind: 'budget'; steps: number; memory?: true };

/** Calls and returns in time order; at equal times calls first, so touching operations count as concurrent. */
function sortedEntries(operations: readonly KeyOperation[], ops: readonly Op[]): Entry[] {
  const entries: Entry[] = [];
  operations.forEach((operation, index) => {
    const op = ops[index] as Op;
    const call: Entry = { isCall: true, index, time: op.call, match: null, prev: null, next: null };
    entries.push(call);
    if (operation.must || operation.until !== undefined) {
      const time = operation.must ? op.ret : (operation.until as number);
      const ret: Entry = { isCall: false, index, time, match: null, prev: null, next: null };
      call.match = ret;
      entries.push(ret);
    }
  });
  entries.sort((a, b) => a.time - b.time || Number(b.isCall) - Number(a.isCall) || a.index - b.index);
  return entries;
}

/** Deterministic 32-bit random numbers (mulberry32), for the Zobrist hash of the linearized set. */
function randomWords(count: number, seed: number): Uint32Array {
  const words = new Uint32Array(count);
  let s = seed >>> 0;
  for (let i = 0; i < count; i++) {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    words[i] = (t ^ (t >>> 14)) >>> 0;
  }
  return words;
}

function isSubset(a: Uint32Array, b: Uint32Array): boolean {
  for (let i = 0; i < a.length; i++) if (((a[i] as number) & ~(b[i] as number)) !== 0) return false;
  return true;
}

/**
 * Wing & Gong's search with Lowe's cache. The linearized determinate operations are identified by
 * a 64-bit Zobrist hash (two 32-bit halves updated by xor as operations are lifted and unlifted);
 * the indeterminate ones by a bitset kept beside each cache entry for the subset test.
 */
function search(operations: readonly KeyOperation[], ops: readonly Op[], allowance: Allowance): SearchResult {
  const entries = sortedEntries(operations, ops);
  const head: Entry = { isCall: false, index: -1, time: -Infinity, match: null, prev: null, next: null };
  let last = head;
  for (const entry of entries) {
    entry.prev = last;
    last.next = entry;
    last = entry;
  }
  const n = operations.length;
  const hashLow = randomWords(n, 0x9e3779b9);
  const hashHigh = randomWords(n, 0x85ebca6b);
  // Open-ended indeterminate operations get compact bit numbers of their own. Bounded ones
  // (`until`) are settled by their bound, taking effect or not: they count with the determinate.
  const optionalBit = new Int32Array(n).fill(-1);
  const bounded = operations.map((operation) => !operation.must && operation.until !== undefined);
  let optionalCount = 0;
  let remaining = 0;
  operations.forEach((operation, i) => {
    if (operation.must || bounded[i]) remaining++;
    else optionalBit[i] = optionalCount++;
  });
  const optional = new Uint32Array(Math.ceil(optionalCount / 32));
  const cache = new Map<string, Uint32Array[]>();
  // One frame per linearized operation: the level's candidates, which one was taken, the state before.
  const stack: Array<{ candidates: Entry[]; taken: number; state: KeyState; forced: boolean }> = [];
  let low = 0;
  let high = 0;
  let state = initialKeyState;
  let steps = 0;
  let cacheBytes = 0;

  const toggle = (index: number): void => {
    const bit = optionalBit[index] as number;
    if (bit < 0) {
      low ^= hashLow[index] as number;
      high ^= hashHigh[index] as number;
    } else {
      optional[bit >>> 5] = (optional[bit >>> 5] as number) ^ (1 << (bit & 31));
    }
  };
  /**
   * The calls that may be linearized next: those before the first return still in the list.
   * Determinate ones are tried first, so indeterminate operations (which may always wait, or
   * never happen) are taken only where the determinate ones lead nowhere. A bounded one is listed
   * twice in a row: taking effect, then settled without effect (`droppedAt`).
   */
  const candidatesNow = (): Entry[] => {
    const determinate: Entry[] = [];
    const settling: Entry[] = [];
    const optionalCalls: Entry[] = [];
    for (let e = head.next; e?.isCall; e = e.next) {
      if (e.match === null) optionalCalls.push(e);
      else if (bounded[e.index]) settling.push(e, e);
      else determinate.push(e);
    }
    if (settling.length === 0 && optionalCalls.length === 0) return determinate;
    return determinate.concat(settling, optionalCalls);
  };
  /** Whether the candidate at `i` is a bounded operation's second listing: settled without effect. */
  const droppedAt = (i: number): boolean => i > 0 && candidates[i - 1] === candidates[i];

  /**
   * Takes `entry` (whose operation leads to `after`) if that configuration was not explored
   * before; false when it was (it failed there, or is being explored further up).
   */
  const take = (entry: Entry, after: KeyState, taken: number, forced: boolean): boolean => {
    const index = entry.index;
    toggle(index);
    const id = `${low}:${high}:${keyStateId(after)}`;
    const seen = cache.get(id);
    if (seen?.some((s) => isSubset(s, optional))) {
      toggle(index);
      return false;
    }
    const copy = optional.slice();
    if (seen) seen.push(copy);
    else cache.set(id, [copy]);
    cacheBytes += CACHE_ENTRY_BYTES + copy.byteLength;
    stack.push({ candidates, taken, state, forced });
    state = after;
    lift(entry);
    if (entry.match !== null) remaining--;
    return true;
  };
  /**
   * A read-only candidate (a read, a refused condition) that the model accepts here without
   * changing the state: taking it now dominates every other choice. A completion that takes it
   * later can take it here instead (it is a candidate now, and its return only constrains the
   * others), and where it is taken later it at most fixes an unknown revision, which leaves every
   * later operation fewer states to be accepted in, never more. So it is taken without a choice
   * point: if the search fails after it, it fails here too. Its configuration has one more
   * determinate operation than any on the stack, so finding it in the cache means it was explored
   * and failed. Only read-only ones: a change that leaves this state as it is (a transaction's
   * delete of an absent key) may be needed later, where it deletes.
   */
  const dominant = (): number => {
    const id = keyStateId(state);
    for (let i = 0; i < candidates.length; i++) {
      const entry = candidates[i] as Entry;
      const operation = operations[entry.index] as KeyOperation;
      if (entry.match === null || !operation.readOnly) continue;
      const after = operation.step(state);
      if (after !== undefined && (after === state || keyStateId(after) === id)) return i;
    }
    return -1;
  };

  let candidates = candidatesNow();
  let next = 0;
  // False on a level entered afresh: look for a dominant candidate first.
  let scanned = false;
  while (remaining > 0) {
    if (++steps % STEPS_PER_LOOK === 0 && allowance.exhausted(STEPS_PER_LOOK)) return { kind: 'budget', steps };
    if (cacheBytes > allowance.maxCacheBytes) return { kind: 'budget', steps, memory: true };
    if (!scanned) {
      scanned = true;
      const i = dominant();
      if (i >= 0) {
        // Taken, or explored before: either way no other candidate of this level needs trying.
        if (take(candidates[i] as Entry, state, i, true)) {
          candidates = candidatesNow();
          next = 0;
          scanned = false;
        } else next = candidates.length;
        continue;
      }
    }
    const entry = candidates[next];
    if (entry !== undefined) {
      const after = droppedAt(next) ? state : (operations[entry.index] as KeyOperation).step(state);
      if (after !== undefined && take(entry, after, next, false)) {
        candidates = candidatesNow();
        next = 0;
        scanned = false;
        continue;
      }
      next++;
    } else {
      // Every candidate of this level tried: undo the last choice and try the one after it (none
      // after a dominant one: the level it was taken at fails with it).
      const top = stack.pop();
      if (top === undefined) return { kind: 'fail' };
      const undone = top.candidates[top.taken] as Entry;
      state = top.state;
      toggle(undone.index);
      unlift(undone);
      if (undone.match !== null) remaining++;
      candidates = top.candidates;
      next = top.forced ? candidates.length : top.taken + 1;
      scanned = true;
    }
  }
  return { kind: 'ok' };
}

function lift(entry: Entry): void {
  (entry.prev as Entry).next = entry.next;
  if (entry.next) entry.next.prev = entry.prev;
  const match = entry.match;
  if (match) {
    (match.prev as Entry).next = match.next;
    if (match.next) match.next.prev = match.prev;
  }
}

function unlift(entry: Entry): void {
  const match = entry.match;
  if (match) {
    (match.prev as Entry).next = match;
    if (match.next) match.next.prev = match;
  }
  (entry.prev as Entry).next = entry;
  if (entry.next) entry.next.prev = entry;
}

/**
 * The details of a key with no linearization: the shortest prefix (cut after the k-th return, in
 * time order) that has none, found by bisection since a prefix of a linearizable history is
 * linearizable. Operations called before the cut and returning after it are indeterminate there.
 */
function explainFailure(key: string, ops: readonly Op[], multiKeyGroups: ReadonlySet<number>, allowance: Allowance): string[] {
  const full = ops.map((op) => keyOperation(op, multiKeyGroups) as KeyOperation);
  const entries = sortedEntries(full, ops);
  const returns = entries.filter((e) => !e.isCall);
  const position = new Map<Entry, number>(entries.map((e, i) => [e, i]));
  const prefix = (count: number): { ops: Op[]; operations: KeyOperation[] } => {
    const cut = position.get(returns[count - 1] as Entry) as number;
    const kept: Op[] = [];
    const operations: KeyOperation[] = [];
    for (const e of entries.slice(0, cut + 1)) {
      if (!e.isCall) continue;
      const op = ops[e.index] as Op;
      const returned = e.match !== null && (position.get(e.match) as number) <= cut;
      const operation = returned ? full[e.index] : keyOperation(op, multiKeyGroups, true);
      if (operation) {
        kept.push(op);
        operations.push(operation);
      }
    }
    return { ops: kept, operations };
  };
  // Invariant: the prefix of `hi` returns fails; every prefix of fewer than `lo` returns passes.
  let lo = 1;
  let hi = returns.length;
  let minimal = true;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    const { ops: midOps, operations } = prefix(mid);
    const result = search(operations, midOps, allowance);
    if (result.kind === 'budget') {
      minimal = false;
      break;
    }
    if (result.kind === 'fail') hi = mid;
    else lo = mid + 1;
  }
  const failing = prefix(hi).ops;
  const last = ops[(returns[hi - 1] as Entry).index] as Op;
  const concurrent = failing.filter((op) => op !== last && op.call <= last.ret && op.ret >= last.call);
  const ids = failing.map((op) => op.id);
  const listed = ids.length > MAX_LISTED_OPS ? [`… ${ids.length - MAX_LISTED_OPS} earlier`, ...ids.slice(-MAX_LISTED_OPS)] : ids;
  return [
    `key ${JSON.stringify(key)}: not linearizable; ${minimal ? 'the shortest prefix with no linearization' : 'a prefix with no linearization (search budget too small to shorten it further)'} has ${failing.length} operations and ends with the return of ${describeOp(last)}`,
    `key ${JSON.stringify(key)}: concurrent with it: ${concurrent.length === 0 ? 'none' : concurrent.slice(-10).map(describeOp).join('; ')}`,
    `key ${JSON.stringify(key)}: op ids of that prefix: ${listed.join(', ')}`,
  ];
}
