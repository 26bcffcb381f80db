import { describe, expect, it } from 'vitest';
import { checkHistory, checkLinearizable, checkRevisions, checkWatch, patchFromFeed } from '../robustness/checkers/index.js';
import type { Op, RegisterOutput, WatchEvent, WatchLog } from '../robustness/history.js';
import { judgeCase, runSelftest, selftestCases } from '../robustness/selftest.js';

/** Searches are bounded in steps, not time: a verdict here never depends on how busy the machine is. */
const SEARCH_STEPS = 5_000_000;

/** Deterministic random numbers in [0, 1) (mulberry32), so a failing seed can be replayed. */
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * A history linearizable by construction: a sequential execution of a bucket (4 registers, 1
 * counter) in which each operation takes effect at its own instant `at`, around which a random
 * interval is drawn for the client that ran it (call before `at`, return after; one open operation
 * per client). An indeterminate operation took effect, or not, at a coin's toss, and its client
 * moves on after its timeout.
 */
function generateHistory(seed: number, count: number, options: { clients: number; indeterminate: number; feed?: WatchEvent[] }): Op[] {
  const rand = random(seed);
  const registers = ['k0', 'k1', 'k2', 'k3'];
  const state = new Map<string, { value: string | null; rev: number }>();
  let counter = { value: 0, rev: 0, live: false };
  let bucketRevision = 0;
  const busyUntil = new Array<number>(options.clients).fill(0);
  const ops: Op[] = [];
  let at = 0;
  for (let i = 0; i < count; i++) {
    at += 0.5 + rand() * 3;
    let free = busyUntil.flatMap((until, client) => (until < at ? [client] : []));
    if (free.length === 0) {
      at = Math.min(...busyUntil) + 0.1;
      free = busyUntil.flatMap((until, client) => (until < at ? [client] : []));
    }
    const client = free[Math.floor(rand() * free.length)] as number;
    const call = Math.max(busyUntil[client] as number, at - rand() * 20) + 0.01;
    const ret = at + rand() * 20;
    const unknown = rand() < options.indeterminate;
    const applies = !unknown || rand() < 0.5;
    busyUntil[client] = ret;
    const base = { id: i + 1, client, instance: client % 2 === 0 ? 'a' : 'b', call, ret: unknown ? Infinity : ret };
    const roll = rand();
    if (rand() < 0.2) {
      // The counter.
      if (roll < 0.4) {
        ops.push({
          ...base,
          model: 'counter',
          key: 'n',
          input: { f: 'read' },
          outcome: unknown ? 'unknown' : 'ok',
          ...(unknown ? {} : { output: { value: counter.value, ...(counter.live ? { revision: counter.rev } : {}) } }),
        });
      } else {
        const delta = Math.floor(rand() * 9) - 3;
        if (applies) {
          counter = { value: counter.value + delta, rev: ++bucketRevision, live: true };
          options.feed?.push({ revision: counter.rev, key: 'n', kind: 'set', value: String(counter.value), at: at + 1 });
        }
        ops.push({
          ...base,
          model: 'counter',
          key: 'n',
          input: { f: 'add', delta },
          outcome: unknown ? 'unknown' : 'ok',
          ...(unknown ? {} : { output: { value: counter.value, revision: counter.rev } }),
        });
      }
      continue;
    }
    const key = registers[Math.floor(rand() * registers.length)] as string;
    const current = state.get(key) ?? { value: null, rev: 0 };
    const value = `v${i + 1}`;
    const outcome = (ok: boolean): Pick<Op, 'outcome' | 'status'> =>
      unknown ? { outcome: 'unknown' } : ok ? { outcome: 'ok' } : { outcome: 'fail', status: 412 };
    const commit = (next: string | null): RegisterOutput => {
      const revision = ++bucketRevision;
      state.set(key, { value: next, rev: revision });
      options.feed?.push(
        next === null ? { revision, key, kind: 'delete', at: at + 1 } : { revision, key, kind: 'set', value: next, at: at + 1 },
      );
      return { revision };
    };
    if (roll < 0.4) {
      const output = { value: current.value, ...(current.value === null ? {} : { revision: current.rev }) };
      ops.push({ ...base, model: 'register', key, input: { f: 'read' }, ...outcome(true), ...(unknown ? {} : { output }) });
    } else if (roll < 0.65) {
      const output = applies ? commit(value) : undefined;
      ops.push({ ...base, model: 'register', key, input: { f: 'write', value }, ...outcome(true), ...(unknown ? {} : { output }) });
    } else if (roll < 0.85) {
      const rev = rand() < 0.7 ? current.rev : Math.max(0, current.rev - 1 - Math.floor(rand() * 3));
      const holds = current.value !== null && current.rev === rev;
      const output = holds && applies ? commit(value) : undefined;
      ops.push({
        ...base,
        model: 'register',
        key,
        input: { f: 'cas', rev, value },
        ...outcome(holds),
        ...(output && !unknown ? { output } : {}),
      });
    } else if (roll < 0.92) {
      const holds = current.value === null;
      const output = holds && applies ? commit(value) : undefined;
      ops.push({
        ...base,
        model: 'register',
        key,
        input: { f: 'create', value },
        ...outcome(holds),
        ...(output && !unknown ? { output } : {}),
      });
    } else {
      const holds = current.value !== null;
      const output = holds && applies ? commit(null) : undefined;
      ops.push({
        ...base,
        model: 'register',
        key,
        input: { f: 'delete' },
        ...outcome(holds),
        ...(holds ? {} : { status: 404 }),
        ...(output && !unknown ? { output } : {}),
      });
    }
  }
  return ops;
}

/** A crash every `every` ms: each operation in flight then becomes indeterminate (its effect, if any, kept). */
function crashEvery(ops: Op[], every: number): void {
  const end = Math.max(...ops.map((op) => op.ret).filter(Number.isFinite));
  for (let at = every; at < end; at += every) {
    for (const op of ops) {
      if (op.call < at && op.ret > at && op.outcome !== 'unknown') {
        op.ret = Infinity;
        op.outcome = 'unknown';
        delete op.output;
        delete op.status;
      }
    }
  }
}

/** A read that returns the value of a write that another acknowledged write replaced before the read began. */
function plantStaleRead(ops: Op[]): Op {
  const acked = (op: Op): boolean => op.model === 'register' && op.outcome === 'ok' && op.input.f === 'write';
  for (const read of ops.slice(ops.length / 2)) {
    if (read.model !== 'register' || read.input.f !== 'read' || read.outcome !== 'ok') continue;
    const older = ops.find(
      (w) => w.key === read.key && acked(w) && ops.some((w2) => w2.key === read.key && acked(w2) && w.ret < w2.call && w2.ret < read.call),
    );
    if (older && older.input.f === 'write') {
      read.output = { value: older.input.value, revision: older.output?.revision };
      return read;
    }
  }
  throw new Error('the generated history has no read to make stale');
}

describe('robustness self-test', () => {
  for (const testCase of selftestCases()) {
    it(`${testCase.expected === 'ok' ? 'passes' : 'fails'}: ${testCase.name}`, () => {
      const { got, verdicts } = judgeCase(testCase);
      // The verdicts' details are the message when it goes wrong.
      expect({ got, verdicts: verdicts.filter((v) => v.result !== 'ok') }).toMatchObject({ got: testCase.expected });
      if (testCase.expected === 'anomaly') expect(verdicts.find((v) => v.checker === testCase.checker)?.details.length).toBeGreaterThan(0);
    });
  }

  it('runSelftest reports every case passing, with histories that must pass and must fail', () => {
    const results = runSelftest();
    expect(results.filter((r) => !r.pass)).toEqual([]);
    expect(results.filter((r) => r.expected === 'ok').length).toBeGreaterThanOrEqual(7);
    expect(results.filter((r) => r.expected === 'anomaly').length).toBeGreaterThanOrEqual(10);
  });
});

describe('linearizability search', () => {
  it('accepts a generated linearizable history of 3,000 operations over 5 keys and 12 clients within its budget', () => {
    const ops = generateHistory(1, 3000, { clients: 12, indeterminate: 0.02 });
    const verdict = checkLinearizable(ops, { budgetSteps: SEARCH_STEPS });
    expect(verdict).toMatchObject({ result: 'ok', details: [] });
    expect(verdict.examined).toBeGreaterThan(2500);
    expect(checkRevisions(ops).result).toBe('ok');
  });

  // Searches of thousands of operations: seconds on a quiet machine, many more on a busy one; the
  // verdict is bounded in steps (SEARCH_STEPS), so only the test's time limit depends on the load.
  it('accepts generated histories with many indeterminate operations', { timeout: 180_000 }, () => {
    for (const seed of [2, 3, 4]) {
      const ops = generateHistory(seed, 1500, { clients: 12, indeterminate: 0.1 });
      expect(ops.filter((op) => op.outcome === 'unknown').length).toBeGreaterThan(100);
      expect(checkLinearizable(ops, { budgetSteps: SEARCH_STEPS })).toMatchObject({ result: 'ok' });
    }
  });

  it('accepts a generated history in which crashes leave every operation in flight indeterminate', () => {
    const ops = generateHistory(11, 3000, { clients: 12, indeterminate: 0.01 });
    crashEvery(ops, 300);
    expect(ops.filter((op) => op.outcome === 'unknown').length).toBeGreaterThan(100);
    expect(checkLinearizable(ops, { budgetSteps: SEARCH_STEPS })).toMatchObject({ result: 'ok' });
  });

  it('finds a stale read planted in a generated history and names its key and operation', () => {
    const ops = generateHistory(5, 3000, { clients: 12, indeterminate: 0.02 });
    const stale = plantStaleRead(ops);
    const verdict = checkLinearizable(ops, { budgetSteps: SEARCH_STEPS });
    expect(verdict.result).toBe('anomaly');
    expect(verdict.details[0]).toContain(`key ${JSON.stringify(stale.key)}: not linearizable`);
    expect(verdict.details[0]).toContain(`ends with the return of #${stale.id} `);
    expect(verdict.details.join('\n')).toMatch(new RegExp(`op ids of that prefix: .*\\b${stale.id}$`, 'm'));
  });

  it('says unchecked, never ok, when a history is too large for the budget', () => {
    const ops = generateHistory(6, 3000, { clients: 12, indeterminate: 0.05 });
    const verdict = checkLinearizable(ops, { budgetSteps: 0 });
    expect(verdict.result).toBe('unchecked');
    expect(verdict.details.length).toBeGreaterThan(0);
    expect(verdict.details[0]).toMatch(
      /^key "(k\d|n)": search ran out of its budget \(0 steps\) after \d+ steps on \d+ operations \(\d+ recorded\); not checked$/,
    );
    // A real run's budget is time; none at all stops at the first look at the clock.
    expect(checkLinearizable(ops, { budgetMs: 0 }).details[0]).toMatch(/^key "(k\d|n)": search ran out of its budget \(0 ms\) after /);
    const verdicts = checkHistory({ scenario: 'budget', ops, watches: [] }, { budgetSteps: 0 });
    expect(verdicts.find((v) => v.checker === 'linearizability')?.result).toBe('unchecked');
  });

  it('says unchecked, never crashes, when the search would need more memory than it may use', () => {
    const ops = generateHistory(6, 3000, { clients: 12, indeterminate: 0.05 });
    const verdict = checkLinearizable(ops, { budgetSteps: SEARCH_STEPS, maxCacheBytes: 10_000 });
    expect(verdict.result).toBe('unchecked');
    expect(verdict.details[0]).toMatch(
      /^key "(k\d|n)": search ran out of its budget \(10000 bytes of cache\) after \d+ steps on \d+ operations \(\d+ recorded\); not checked$/,
    );
  });

  it('takes a refusal as its condition failing only when the status says so', () => {
    const history = (status: number): Op[] => [
      {
        id: 1,
        client: 1,
        instance: 'a',
        model: 'register',
        key: 'x',
        input: { f: 'write', value: 'a' },
        call: 0,
        ret: 5,
        outcome: 'ok',
        output: { revision: 1 },
      },
      {
        id: 2,
        client: 2,
        instance: 'b',
        model: 'register',
        key: 'x',
        input: { f: 'cas', rev: 1, value: 'b' },
        call: 10,
        ret: 20,
        outcome: 'fail',
        status,
      },
      {
        id: 3,
        client: 1,
        instance: 'a',
        model: 'register',
        key: 'x',
        input: { f: 'read' },
        call: 25,
        ret: 30,
        outcome: 'ok',
        output: { value: 'a', revision: 1 },
      },
    ];
    // 429: refused by the rate limit, not by If-Match; 412 while the key was at revision 1 is impossible.
    expect(checkLinearizable(history(429), { budgetSteps: SEARCH_STEPS }).result).toBe('ok');
    expect(checkLinearizable(history(412), { budgetSteps: SEARCH_STEPS }).result).toBe('anomaly');
  });

  it("accepts a transaction's delete of an absent key, but not a plain DELETE answered ok on one", () => {
    const ops = (group: number | undefined): Op[] => [
      {
        id: 1,
        client: 1,
        instance: 'a',
        model: 'register',
        key: 'x',
        input: { f: 'delete' },
        call: 0,
        ret: 5,
        outcome: 'ok',
        output: { revision: 1 },
        ...(group === undefined ? {} : { group }),
      },
      {
        id: 2,
        client: 1,
        instance: 'a',
        model: 'register',
        key: 'y',
        input: { f: 'write', value: 'a' },
        call: 0,
        ret: 5,
        outcome: 'ok',
        output: { revision: 1 },
        ...(group === undefined ? {} : { group }),
      },
      {
        id: 3,
        client: 1,
        instance: 'a',
        model: 'register',
        key: 'x',
        input: { f: 'read' },
        call: 6,
        ret: 7,
        outcome: 'ok',
        output: { value: null },
      },
    ];
    expect(checkLinearizable(ops(7), { budgetSteps: SEARCH_STEPS }).result).toBe('ok');
    expect(checkLinearizable(ops(undefined), { budgetSteps: SEARCH_STEPS }).result).toBe('anomaly');
  });
});

describe('patching from the watch feed', () => {
  /** A generated history with crashes, and the complete feed of its execution seen by one watcher. */
  const crashed = (seed: number): { ops: Op[]; watches: WatchLog[] } => {
    const feed: WatchEvent[] = [];
    const ops = generateHistory(seed, 3000, { clients: 12, indeterminate: 0.05, feed });
    crashEvery(ops, 200);
    const last = feed.at(-1)?.revision ?? 0;
    return { ops, watches: [{ watcher: 99, caughtUpTo: last, segments: [{ instance: 'a', since: 0, events: feed }] }] };
  };

  it('resolves or drops every indeterminate change of a crashed history from its feed, and the patched history passes', () => {
    const { ops, watches } = crashed(21);
    const unknown = ops.filter((op) => op.outcome === 'unknown' && op.input.f !== 'read').length;
    expect(unknown).toBeGreaterThan(150);
    const patch = patchFromFeed(ops, watches, checkWatch(watches, ops));
    expect(patch).toMatchObject({ left: 0, unexplained: [] });
    expect(patch!.resolved).toBeGreaterThan(50);
    expect(patch!.dropped).toBeGreaterThan(50);
    expect(patch!.resolved + patch!.dropped).toBe(unknown);
    expect(patch!.ops.filter((op) => op.outcome === 'unknown' && op.input.f !== 'read')).toEqual([]);
    const verdict = checkHistory({ scenario: 'patched', ops, watches }, { budgetSteps: SEARCH_STEPS }).find(
      (v) => v.checker === 'linearizability',
    );
    expect(verdict).toMatchObject({
      result: 'ok',
      details: [
        `patched from the watch feed: ${patch!.resolved} indeterminate operations resolved, ${patch!.dropped} dropped (never applied), 0 left indeterminate`,
      ],
    });
  });

  it('still finds a stale read planted in a patched history', () => {
    const { ops, watches } = crashed(22);
    const stale = plantStaleRead(ops);
    const verdict = checkHistory({ scenario: 'patched', ops, watches }, { budgetSteps: SEARCH_STEPS }).find(
      (v) => v.checker === 'linearizability',
    );
    expect(verdict?.result).toBe('anomaly');
    expect(verdict?.details[0]).toContain(`key ${JSON.stringify(stale.key)}: not linearizable`);
  });

  it('leaves the history as recorded when no watcher is known to have reached the final revision, or a watch rule failed', () => {
    const { ops, watches } = crashed(23);
    const incomplete = watches.map(({ caughtUpTo: _, ...w }) => w);
    expect(patchFromFeed(ops, incomplete, checkWatch(incomplete, ops))).toBeUndefined();
    const short = watches.map((w) => ({ ...w, caughtUpTo: 0 }));
    expect(patchFromFeed(ops, short, checkWatch(short, ops))).toBeUndefined();
    expect(
      patchFromFeed(ops, watches, [{ checker: 'watch-reliable', result: 'anomaly', details: ['a gap'], examined: 1 }]),
    ).toBeUndefined();
  });
});

describe('watch rules', () => {
  it('checks only the keys under a watcher’s prefix, and up to the revision it caught up to', () => {
    const ops: Op[] = [
      {
        id: 1,
        client: 1,
        instance: 'a',
        model: 'register',
        key: 'a/1',
        input: { f: 'write', value: 'x' },
        call: 0,
        ret: 5,
        outcome: 'ok',
        output: { revision: 1 },
      },
      {
        id: 2,
        client: 1,
        instance: 'a',
        model: 'register',
        key: 'b/1',
        input: { f: 'write', value: 'y' },
        call: 6,
        ret: 9,
        outcome: 'ok',
        output: { revision: 2 },
      },
      {
        id: 3,
        client: 1,
        instance: 'a',
        model: 'register',
        key: 'a/2',
        input: { f: 'write', value: 'z' },
        call: 10,
        ret: 12,
        outcome: 'ok',
        output: { revision: 3 },
      },
    ];
    const events = [{ revision: 1, key: 'a/1', kind: 'set' as const, value: 'x', at: 6 }];
    const reliable = (caughtUpTo?: number) =>
      checkWatch(
        [
          {
            watcher: 1,
            prefix: 'a/',
            ...(caughtUpTo === undefined ? {} : { caughtUpTo }),
            segments: [{ instance: 'a', since: 0, events }],
          },
        ],
        ops,
      ).find((v) => v.checker === 'watch-reliable');
    // b/1 is outside the prefix; a/2 at revision 3 is missed only if the watcher is known to have caught up to 3.
    expect(reliable()?.result).toBe('ok');
    expect(reliable(3)).toMatchObject({ result: 'anomaly', details: [expect.stringContaining('never received revision 3 of "a/2"')] });
  });
});
