import { describe, expect, it } from 'vitest';
import { VerificationScheduler } from '../../src/auth/verification-scheduler.js';

/** A verification the test finishes by hand, recording the order the scheduler started them in. */
function harness(limits: ConstructorParameters<typeof VerificationScheduler>[0]) {
  const scheduler = new VerificationScheduler(limits);
  const started: string[] = [];
  const finishers = new Map<string, () => void>();
  const submit = (source: string, name: string, abandoned?: () => boolean) =>
    scheduler.run(
      source,
      () =>
        new Promise<string>((resolve) => {
          started.push(name);
          finishers.set(name, () => resolve(name));
        }),
      abandoned,
    );
  /** Finishes `name` and lets the scheduler hand its slot on. */
  const finish = async (name: string) => {
    finishers.get(name)!();
    for (let i = 0; i < 5; i++) await Promise.resolve();
  };
  return { scheduler, started, submit, finish };
}

describe('verification scheduler: fair between sources, bounded in time', () => {
  it('runs at most `concurrency` at once and starts the next when one finishes', async () => {
    const h = harness({ concurrency: 2, maxSourceWaitMs: 10_000, maxTotalWaitMs: 10_000 });
    const results = ['a1', 'a2', 'a3'].map((n) => h.submit('a', n));
    expect(h.started).toEqual(['a1', 'a2']);
    await h.finish('a1');
    expect(h.started).toEqual(['a1', 'a2', 'a3']);
    await h.finish('a2');
    await h.finish('a3');
    expect(await Promise.all(results)).toEqual(['a1', 'a2', 'a3'].map((value) => ({ ran: true, value })));
  });

  it('a source flooding waits behind itself: another source runs at the next free slot', async () => {
    const h = harness({ concurrency: 1, maxSourceWaitMs: 60_000, maxTotalWaitMs: 60_000 });
    for (let i = 1; i <= 5; i++) void h.submit('flood', `f${i}`);
    void h.submit('b', 'b1');
    void h.submit('c', 'c1');
    void h.submit('b', 'b2');
    for (const name of ['f1', 'f2', 'b1', 'c1', 'f3', 'b2', 'f4']) await h.finish(name);
    // Round-robin over the waiting sources, each in its own order.
    expect(h.started).toEqual(['f1', 'f2', 'b1', 'c1', 'f3', 'b2', 'f4', 'f5']);
  });

  it('refuses what would wait past the per-source time, with Retry-After, while another source is still admitted', async () => {
    // Estimated 100 ms a verification, one at a time: a source may have 250 ms waiting.
    const h = harness({ concurrency: 1, maxSourceWaitMs: 250, maxTotalWaitMs: 60_000, initialCostMs: 100 });
    const a = ['a1', 'a2', 'a3', 'a4'].map((n) => h.submit('a', n));
    const refused = await a[3];
    expect(refused).toEqual({ ran: false, reason: 'source', retryAfterSeconds: 1 });
    expect(h.scheduler.stats()).toMatchObject({ running: 1, waiting: 2 });
    // Another source's first verification would wait one round (200 ms): admitted.
    const b = h.submit('b', 'b1');
    expect(h.scheduler.stats()).toMatchObject({ waiting: 3, sources: 2 });
    for (const name of ['a1', 'a2', 'b1', 'a3']) await h.finish(name);
    expect(await b).toEqual({ ran: true, value: 'b1' });
    expect(h.started).toEqual(['a1', 'a2', 'b1', 'a3']);
  });

  it('refuses past the total drain time, whichever the source', async () => {
    const h = harness({ concurrency: 2, maxSourceWaitMs: 60_000, maxTotalWaitMs: 120, initialCostMs: 100 });
    // Two run (50 ms until a slot frees); each queued job adds 50 ms: 150 ms ahead of a fifth.
    for (const source of ['a', 'b', 'c', 'd']) void h.submit(source, source);
    expect(h.scheduler.stats()).toMatchObject({ running: 2, waiting: 2 });
    expect(await h.submit('e', 'e')).toEqual({ ran: false, reason: 'total', retryAfterSeconds: 1 });
    const long = new VerificationScheduler({ concurrency: 1, maxSourceWaitMs: 60_000, maxTotalWaitMs: 1000, initialCostMs: 1000 });
    void long.run('a', () => new Promise(() => {}));
    void long.run('b', () => new Promise(() => {}));
    // 2 s of work ahead against a 1 s bound: Retry-After says how much too long, in whole seconds.
    expect(await long.run('c', async () => 'c')).toMatchObject({ ran: false, reason: 'total', retryAfterSeconds: 1 });
  });

  it('skips a queued verification nobody waits for any more', async () => {
    const h = harness({ concurrency: 1, maxSourceWaitMs: 60_000, maxTotalWaitMs: 60_000 });
    void h.submit('a', 'a1');
    let gone = false;
    const skipped = h.submit('b', 'b1', () => gone);
    const kept = h.submit('c', 'c1');
    gone = true;
    await h.finish('a1');
    expect(await skipped).toMatchObject({ ran: false, reason: 'abandoned' });
    expect(h.started).toEqual(['a1', 'c1']);
    await h.finish('c1');
    expect(await kept).toEqual({ ran: true, value: 'c1' });
    expect(h.scheduler.stats()).toMatchObject({ running: 0, waiting: 0, sources: 0 });
  });

  it('the total bound takes from the longest queue: a flooding source cannot shut a newcomer out', async () => {
    const h = harness({ concurrency: 1, maxSourceWaitMs: 60_000, maxTotalWaitMs: 300, initialCostMs: 100 });
    const flood = ['f1', 'f2', 'f3', 'f4', 'f5'].map((n) => h.submit('flood', n));
    // f5 would make the drain 400 ms: refused (its own source has the longest queue).
    expect(await flood[4]).toMatchObject({ ran: false, reason: 'total' });
    // A newcomer takes the place of the flood's last job.
    const b = h.submit('b', 'b1');
    expect(await flood[3]).toMatchObject({ ran: false, reason: 'total' });
    for (const name of ['f1', 'f2', 'b1']) await h.finish(name);
    expect(await b).toEqual({ ran: true, value: 'b1' });
    expect(h.started).toEqual(['f1', 'f2', 'b1', 'f3']);
  });

  it('when verifications get slower, queued ones that would now wait too long are refused at once', async () => {
    let clock = 0;
    const h = harness({ concurrency: 1, maxSourceWaitMs: 250, maxTotalWaitMs: 60_000, initialCostMs: 100, now: () => clock });
    const jobs = ['a1', 'a2', 'a3'].map((n) => h.submit('a', n));
    expect(h.scheduler.stats()).toMatchObject({ running: 1, waiting: 2 });
    // a1 took a whole second: the estimate becomes 280 ms, and a3 (one job ahead of it) would wait 280 ms.
    clock = 1000;
    await h.finish('a1');
    expect(h.scheduler.stats().costMs).toBeCloseTo(280);
    expect(await jobs[2]).toEqual({ ran: false, reason: 'source', retryAfterSeconds: 1 });
    expect(h.started).toEqual(['a1', 'a2']);
    await h.finish('a2');
    expect(await jobs[1]).toEqual({ ran: true, value: 'a2' });
  });
});
