import { checkHistory } from './checkers/index.js';
import type { RecordedHistory, Verdict } from './history.js';
import { extraSelftestCases } from './selftest-extra.js';
import { allWatchedEvents, bankRead, del, fenced, history, Ops, set, watchedWrites, watcher } from './selftest-builders.js';
import { webhookCases } from './selftest-webhooks.js';

/**
 * Hand-made histories the checkers must judge right before their verdicts on real runs mean
 * anything: each kind of history kvb must be allowed to produce passes, and each anomaly the
 * suite exists to catch fails, in the checker meant to catch it. `npm run robustness -- --selftest`
 * runs them; test/unit/robustness-checkers.test.ts runs each as its own test.
 */
export interface SelftestCase {
  name: string;
  expected: 'ok' | 'anomaly';
  /** For an anomaly: the checker that must report it (a history that must pass passes every checker). */
  checker?: string;
  history: RecordedHistory;
}

export interface SelftestResult {
  name: string;
  expected: 'ok' | 'anomaly';
  got: Verdict['result'];
  pass: boolean;
}

/** In steps, not time: a self-test's verdict never depends on how busy the machine is. */
const SEARCH_STEPS = 1_000_000;

function mustPass(): SelftestCase[] {
  const cases: SelftestCase[] = [];
  const ok = (name: string, parts: Partial<RecordedHistory>): void => {
    cases.push({ name, expected: 'ok', history: history(name, parts) });
  };
  {
    const h = new Ops();
    h.write(1, 'x', 'a', [0, 10], 1);
    h.write(2, 'y', 'p', [2, 8], 2);
    h.read(3, 'x', [5, 15], 'a', 1);
    h.write(4, 'x', 'b', [12, 20], 3);
    h.read(5, 'x', [16, 30], 'a', 1); // concurrent with the write of b: may still see a
    h.read(2, 'x', [18, 22], 'b', 3); // ... while another reader already sees b
    h.read(1, 'x', [31, 35], 'b', 3);
    h.read(3, 'y', [16, 19], 'p', 2);
    ok('register: concurrent reads and writes that linearize', { ops: h.ops });
  }
  {
    const h = new Ops();
    h.write(1, 'x', 'a', [0, 5], 1);
    h.write(2, 'x', 'b', [6, Infinity]);
    h.read(3, 'x', [20, 25], 'b', 2);
    h.read(3, 'x', [26, 30], 'b', 2);
    ok('register: an indeterminate write whose value a later read returns', { ops: h.ops });
  }
  {
    const h = new Ops();
    h.write(1, 'x', 'a', [0, 5], 1);
    h.write(2, 'x', 'b', [6, Infinity]);
    h.read(3, 'x', [20, 25], 'a', 1);
    h.write(1, 'x', 'c', [30, 35], 3);
    h.read(3, 'x', [40, 45], 'c', 3);
    ok('register: an indeterminate write never observed', { ops: h.ops });
  }
  {
    const h = new Ops();
    h.write(1, 'x', 'a', [0, 5], 1);
    h.cas(2, 'x', 1, 'b', [10, 20], 2);
    h.cas(3, 'x', 1, 'c', [11, 21], 'fail');
    h.cas(4, 'x', 1, 'd', [12, Infinity], 'fail'); // no answer: indeterminate
    h.read(1, 'x', [25, 30], 'b', 2);
    ok('register: concurrent compare-and-set on one revision, exactly one wins', { ops: h.ops });
  }
  {
    // The transaction could delete the absent key at once, changing nothing; it must still be
    // placeable later, after the write, where it deletes (a search that takes it early as a
    // harmless read, without a choice point, finds no order).
    const h = new Ops();
    h.deleteAndWrite(1, 'x', { y: 't' }, [0, 100], 3);
    h.write(2, 'x', 'a', [1, 2], 1);
    h.read(3, 'x', [50, 60], null);
    ok("register: a transaction's delete that would find the key absent early is placed later, where it deletes", { ops: h.ops });
  }
  {
    const h = new Ops();
    h.create(1, 'x', 'a', [0, 5], 1);
    h.create(2, 'x', 'b', [6, 9], 'fail');
    h.delete(1, 'x', [10, 12], 2);
    h.read(2, 'x', [13, 14], null);
    h.create(1, 'x', 'c', [15, 18], 3);
    h.read(2, 'x', [19, 20], 'c', 3);
    ok('register: create, refused create, delete, create again', { ops: h.ops });
  }
  {
    const h = new Ops();
    h.increment(1, 'n', 1, [0, 5], 1, 1);
    h.increment(2, 'n', 5, [6, Infinity]);
    h.increment(3, 'n', 2, [7, 9], 8, 3); // the indeterminate +5 took effect before it
    h.count(1, 'n', [10, 15], 8, 3);
    ok('counter: an indeterminate add that later reads show applied', { ops: h.ops });
  }
  {
    const h = new Ops();
    h.increment(1, 'n', 1, [0, 5], 1, 1);
    h.increment(2, 'n', 5, [6, Infinity]);
    h.count(3, 'n', [10, 15], 1, 1);
    h.increment(3, 'n', 2, [16, 20], 3, 2);
    ok('counter: an indeterminate add that later reads show never applied', { ops: h.ops });
  }
  {
    const h = new Ops();
    h.transaction(1, { x: 'a', y: 'b' }, [0, 5], 1);
    h.read(2, 'x', [6, 7], 'a', 1);
    h.read(2, 'y', [8, 9], 'b', 1);
    // Refused (409): y's check failed while x's held. A refused multi-key request says nothing of one key.
    h.checkedTransaction(3, { x: [1, 'c'], y: [9, 'd'] }, [10, 12], 'fail');
    h.read(2, 'x', [13, 14], 'a', 1);
    h.checkedTransaction(3, { x: [1, 'e'], y: [1, 'f'] }, [15, 18], 2);
    h.read(2, 'y', [19, 20], 'f', 2);
    ok('transaction: one revision for all its keys; a refused one says nothing of each key', { ops: h.ops });
  }
  {
    const watches = [
      watcher(1, [
        { instance: 'a', since: 0, events: allWatchedEvents().slice(0, 4) },
        { instance: 'b', since: 3, events: allWatchedEvents().slice(4) },
      ]),
      watcher(2, [{ instance: 'b', since: 0, events: allWatchedEvents() }], 5),
    ];
    ok('watch: complete, with a resume on another instance', { ops: watchedWrites(), watches });
  }
  {
    const h = new Ops();
    h.write(1, 'x', 'a', [0, 5], 1);
    h.write(2, 'x', 'b', [6, Infinity]);
    h.write(3, 'x', 'c', [7, Infinity]);
    h.read(3, 'x', [20, 25], 'b', 2);
    h.write(1, 'x', 'd', [30, 35], 3);
    // b shows in the feed (resolved, its return bounded by the event's receipt at 12); c never does (dropped).
    const watches = [
      watcher(1, [{ instance: 'a', since: 0, events: [set('x', 1, 'a', 4), set('x', 2, 'b', 12), set('x', 3, 'd', 34)] }], 3),
    ];
    ok('patching: an indeterminate write the complete feed shows, and one it never shows', { ops: h.ops, watches });
  }
  {
    const h = new Ops();
    h.increment(1, 'n', 1, [0, 5], 1, 1);
    h.increment(2, 'n', 2, [6, Infinity]);
    h.increment(3, 'n', 5, [7, Infinity]);
    h.increment(4, 'n', 2, [8, Infinity]);
    h.count(1, 'n', [20, 25], 3, 2);
    const watches = [watcher(1, [{ instance: 'a', since: 0, events: [set('n', 1, '1', 4), set('n', 2, '3', 10)] }], 2)];
    ok('patching: of indeterminate adds, the feed shows one +2 applied; the +5 and the other +2 never were', { ops: h.ops, watches });
  }
  ok('bank: every snapshot sums to the total', {
    bank: {
      accounts: ['a', 'b', 'c'],
      total: 300,
      nonNegative: true,
      reads: [
        bankRead(5, { a: 100, b: 100, c: 100 }, 0, 10),
        bankRead(7, { a: 50, b: 150, c: 100 }, 5, 20),
        bankRead(7, { a: 50, b: 150, c: 100 }, 21, 25),
        bankRead(9, { a: 0, b: 150, c: 150 }, 30, 35),
      ],
    },
  });
  ok('fencing: tokens never decrease in revision order', {
    fenced: [
      fenced(1, 5, 6, 0, 10),
      fenced(1, 5, 8, 11, 20),
      fenced(2, 9, 10, 21, 30),
      { holder: 1, token: 5, outcome: 'fail', call: 31, ret: 40 },
    ],
  });
  // The extra workloads' rules (selftest-extra.ts), the ones that must pass.
  cases.push(...extraSelftestCases().filter((c) => c.expected === 'ok'));
  return cases;
}

function mustFail(): SelftestCase[] {
  const cases: SelftestCase[] = [];
  const bad = (name: string, checker: string, parts: Partial<RecordedHistory>): void => {
    cases.push({ name, expected: 'anomaly', checker, history: history(name, parts) });
  };
  {
    const h = new Ops();
    h.write(1, 'x', 'a', [0, 5], 1);
    h.write(1, 'x', 'b', [10, 15], 2);
    h.read(2, 'x', [20, 25], 'a', 1);
    bad('register: a stale read after a completed write', 'linearizability', { ops: h.ops });
  }
  {
    const h = new Ops();
    h.write(1, 'x', 'a', [0, 5], 1);
    h.cas(2, 'x', 1, 'b', [10, 20], 2);
    h.cas(3, 'x', 1, 'c', [11, 21], 3);
    bad('register: two compare-and-sets on the same revision both acknowledged', 'linearizability', { ops: h.ops });
  }
  {
    const h = new Ops();
    h.write(1, 'x', 'a', [0, 5], 1);
    h.cas(2, 'x', 1, 'b', [10, 20], 'fail');
    h.read(3, 'x', [25, 30], 'a', 1);
    bad('register: a compare-and-set refused while its revision held throughout', 'linearizability', { ops: h.ops });
  }
  {
    const h = new Ops();
    h.write(1, 'x', 'a', [0, 5], 1);
    h.write(1, 'x', 'a', [6, 9], 3);
    h.read(2, 'x', [10, 12], 'a', 1);
    bad('register: the right value at the revision of an overwritten write', 'linearizability', { ops: h.ops });
  }
  {
    const h = new Ops();
    h.write(1, 'x', 'a', [0, 5], 2);
    h.write(1, 'x', 'b', [6, 9], 4);
    h.read(2, 'x', [10, 12], 'a', 2);
    bad('revisions: a read older than a write to its key acknowledged before it began', 'revisions', { ops: h.ops });
  }
  {
    const h = new Ops();
    h.write(1, 'x', 'a', [0, 5], 3);
    h.write(2, 'y', 'b', [1, 6], 3);
    bad('revisions: two acknowledged writes with the same revision', 'revisions', { ops: h.ops });
  }
  {
    const h = new Ops();
    h.write(1, 'x', 'a', [0, 5], 7);
    h.write(2, 'y', 'b', [10, 15], 6);
    bad('revisions: a write numbered below one acknowledged before it began', 'revisions', { ops: h.ops });
  }
  {
    const h = new Ops();
    h.increment(1, 'n', 1, [0, 10], 1, 1);
    h.increment(2, 'n', 1, [1, 11], 1, 2);
    h.count(3, 'n', [20, 25], 1, 2);
    bad('counter: an acknowledged increment lost', 'linearizability', { ops: h.ops });
  }
  {
    const h = new Ops();
    h.write(1, 'x', 'a', [0, 5], 1);
    h.write(2, 'x', 'b', [6, Infinity]);
    h.read(3, 'x', [20, 25], 'a', 1);
    // Without the feed, b could take effect after the read; the feed says it had by 10.
    const watches = [watcher(1, [{ instance: 'a', since: 0, events: [set('x', 1, 'a', 4), set('x', 2, 'b', 10)] }], 2)];
    bad('patching: a stale read after an indeterminate write the feed shows applied', 'linearizability', { ops: h.ops, watches });
  }
  {
    const h = new Ops();
    h.increment(1, 'n', 1, [0, 5], 1, 1);
    h.increment(2, 'n', 5, [6, Infinity]);
    h.count(3, 'n', [20, 25], 1, 1);
    const watches = [watcher(1, [{ instance: 'a', since: 0, events: [set('n', 1, '1', 4), set('n', 2, '6', 10)] }], 2)];
    bad('patching: a counter read that misses an indeterminate add the feed shows applied', 'linearizability', { ops: h.ops, watches });
  }
  {
    const h = new Ops();
    h.write(1, 'x', 'a', [0, 5], 1);
    h.read(2, 'x', [20, 25], 'a', 1);
    const watches = [
      watcher(1, [{ instance: 'a', since: 0, events: [set('x', 1, 'a', 4), set('x', 2, 'forged', 10), set('x', 3, 'a', 11)] }], 3),
    ];
    bad('patching: a watch feed with writes no client made', 'linearizability', { ops: h.ops, watches });
  }
  bad('watch: a gap (an acknowledged transaction never delivered)', 'watch-reliable', {
    ops: watchedWrites(),
    watches: [
      watcher(1, [
        { instance: 'a', since: 0, events: allWatchedEvents().slice(0, 2) },
        { instance: 'b', since: 2, events: allWatchedEvents().slice(4) },
      ]),
    ],
  });
  bad('watch: an event delivered twice across a resume', 'watch-unique', {
    ops: watchedWrites(),
    watches: [
      watcher(1, [
        { instance: 'a', since: 0, events: allWatchedEvents().slice(0, 4) },
        { instance: 'b', since: 2, events: allWatchedEvents().slice(2) },
      ]),
    ],
  });
  bad("watch: a transaction's events split", 'watch-atomic', {
    ops: watchedWrites(),
    watches: [
      watcher(1, [
        { instance: 'a', since: 0, events: allWatchedEvents().slice(0, 3) },
        { instance: 'b', since: 3, events: allWatchedEvents().slice(4) },
      ]),
    ],
  });
  bad('watch: events out of revision order', 'watch-ordered', {
    ops: watchedWrites(),
    watches: [watcher(1, [{ instance: 'a', since: 0, events: [...allWatchedEvents().slice(0, 4), del('x', 5), set('z', 4, '5')] }])],
  });
  bad('watch: an event carrying another value than its write', 'watch-valid', {
    ops: watchedWrites(),
    watches: [watcher(1, [{ instance: 'a', since: 0, events: [set('x', 1, '1'), set('y', 2, 'two'), ...allWatchedEvents().slice(2)] }])],
  });
  bad("bank: a snapshot that doesn't sum to the total", 'bank', {
    bank: {
      accounts: ['a', 'b', 'c'],
      total: 300,
      reads: [bankRead(5, { a: 100, b: 100, c: 100 }, 0, 10), bankRead(7, { a: 50, b: 100, c: 100 }, 11, 20)],
    },
  });
  bad('bank: two snapshots at one revision disagree', 'bank', {
    bank: { accounts: ['a', 'b'], total: 200, reads: [bankRead(5, { a: 100, b: 100 }, 0, 10), bankRead(5, { a: 90, b: 110 }, 11, 20)] },
  });
  bad('fencing: a write with an older token after one with a newer token', 'fencing', {
    fenced: [fenced(1, 5, 6, 0, 10), fenced(2, 9, 10, 11, 20), fenced(1, 5, 11, 12, 21)],
  });
  cases.push(...extraSelftestCases().filter((c) => c.expected === 'anomaly'));
  return cases;
}

/** Every self-test case, the ones that must pass first. */
/**
 * Indeterminate writes bounded by the death of the process that took them (SQLite:
 * checkers/process-lives.ts): settled by the kill, unless the instance was spawned again before
 * the client saw the request fail (then it may have reached the new process).
 */
function processLifeCases(): SelftestCase[] {
  const killed = (restartedAt: number, seenAfter: 'a' | 'b') => {
    const h = new Ops();
    h.write(1, 'x', 'a', [0, 5], 1);
    const cut = h.write(2, 'x', 'b', [6, Infinity]);
    cut.failedAt = 8;
    h.read(3, 'x', [10, 12], 'a', 1);
    h.read(3, 'x', [20, 22], seenAfter, seenAfter === 'a' ? 1 : 2);
    return { ops: h.ops, lives: { a: [{ started: -10, exited: 7.5 }, { started: restartedAt }] } };
  };
  const named = (name: string, expected: 'ok' | 'anomaly', parts: Partial<RecordedHistory>): SelftestCase => ({
    name,
    expected,
    ...(expected === 'anomaly' && { checker: 'linearizability' }),
    history: history(name, parts),
  });
  return [
    named('register: a write cut by a kill, never applied', 'ok', killed(9, 'a')),
    named('register: a write cut by a kill that takes effect after the process was gone', 'anomaly', killed(9, 'b')),
    named(
      'register: a write cut by a kill, its instance spawned again before the client saw it fail (it may have reached the new process)',
      'ok',
      killed(7.8, 'b'),
    ),
    (() => {
      const h = new Ops();
      h.write(1, 'x', 'a', [0, 5], 1);
      const cut = h.write(2, 'x', 'b', [6, Infinity]);
      cut.failedAt = 8;
      h.read(3, 'x', [10, 12], 'b', 2);
      return named('register: a write cut by a kill that took effect before it', 'ok', {
        ops: h.ops,
        lives: { a: [{ started: -10, exited: 7.5 }, { started: 9 }] },
      });
    })(),
  ];
}

export function selftestCases(): SelftestCase[] {
  return [...mustPass(), ...mustFail(), ...processLifeCases(), ...webhookCases()];
}

/** What the checkers say of one case: the worst verdict of all (must pass), or the named checker's (must fail). */
export function judgeCase(testCase: SelftestCase): { got: Verdict['result']; verdicts: Verdict[] } {
  const verdicts = checkHistory(testCase.history, { budgetSteps: SEARCH_STEPS });
  if (testCase.checker !== undefined) {
    const named = verdicts.find((v) => v.checker === testCase.checker);
    return { got: named?.result ?? 'unchecked', verdicts };
  }
  const results = verdicts.map((v) => v.result);
  const got = results.includes('anomaly') ? 'anomaly' : results.includes('unchecked') || results.length === 0 ? 'unchecked' : 'ok';
  return { got, verdicts };
}

export function runSelftest(): SelftestResult[] {
  return selftestCases().map((testCase) => {
    const { got } = judgeCase(testCase);
    return { name: testCase.name, expected: testCase.expected, got, pass: got === testCase.expected };
  });
}
