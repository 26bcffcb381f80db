import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, createBucket, expectError } from '../helpers/http.js';
import { type RunningServer, startServer } from '../helpers/server.js';
import { latencies, percentile } from '../helpers/latency.js';


describe('13. the CPU spent verifying unseen credentials is bounded', () => {
  // The scheduler's own rules (fair turns, time bounds) are in test/unit/verification-scheduler.test.ts;
  // two sources at once against a spawned server in test/http/first-contact.test.ts.
  let server: RunningServer;
  let bucket: string;
  beforeAll(async () => {
    // A short queue allowance, so 100 guesses a second are refused on any machine's speed.
    server = await startServer({ args: ['--verification-wait', '1'] });
    bucket = await createBucket(server.api, { secret_key: 'the-secret', read_key: 'the-reader', write_key: 'the-writer' });
  });
  afterAll(async () => {
    await server.stop();
  });

  it('a flood of wrong credentials gets 429 + Retry-After past the bound, and cached requests keep their latency', { timeout: 120_000 }, async () => {
    const url = `${server.api}/${bucket}/missing`;
    await latencies(url, 'the-reader', 5); // verified once, cached from here on
    const quiet = await latencies(url, 'the-reader', 100);

    // 300 guesses at once: far more than the 1 s allowance (--verification-wait 1) on any machine's speed.
    const statuses = new Map<number, number>();
    let retryAfter: string | null = null;
    const guesses = Array.from({ length: 300 }, async () => {
      const answer = await call(url, { token: randomBytes(12).toString('hex') });
      statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
      if (answer.status === 429) retryAfter = answer.headers.get('retry-after');
    });
    // Measured once every guess has arrived and is either refused or queued for its hash (the
    // server's own gauges), not after a fixed time.
    const queued = async () => {
      const text = (await call(`${server.url}/metrics`)).text;
      const gauge = (name: string) => Number(new RegExp(`^${name} (\\d+)`, 'm').exec(text)?.[1]);
      return gauge('kvb_credential_verifications_running') + gauge('kvb_credential_verifications_waiting');
    };
    await expect.poll(async () => (await queued()) + [...statuses.values()].reduce((a, b) => a + b, 0), { timeout: 60_000, interval: 50 }).toBe(300);
    const flooded = await latencies(url, 'the-reader', 100);
    await Promise.all(guesses);

    const figures = `quiet p50 ${percentile(quiet, 50).toFixed(1)} ms, p99 ${percentile(quiet, 99).toFixed(1)} ms; ` +
      `flooded p50 ${percentile(flooded, 50).toFixed(1)} ms, p99 ${percentile(flooded, 99).toFixed(1)} ms; statuses ${JSON.stringify([...statuses])}`;
    if (process.env.KVB_PRINT_FIGURES) console.log(figures);
    expect(statuses.get(429) ?? 0, figures).toBeGreaterThan(0);
    expect(Number(retryAfter)).toBeGreaterThanOrEqual(1);
    // Cached requests never queue for a hash: they keep close to their quiet latency, compared
    // with the same run's quiet median (not an absolute figure, which a loaded machine would
    // break), with room for the CPU the admitted hashes still take.
    expect(percentile(flooded, 50), figures).toBeLessThan(percentile(quiet, 50) * 4 + 50);
  });

  it('a wrong credential at an ordinary rate still gets 401, and a right one its access', async () => {
    await expect
      .poll(async () => (await call(`${server.api}/${bucket}/k`, { token: 'a-wrong-guess' })).status, { timeout: 10_000 })
      .toBe(401);
    expectError(await call(`${server.api}/${bucket}/k`, { token: 'another-wrong-guess' }), 401, 'unauthorized');
    expect((await call(`${server.api}/${bucket}/k`, { method: 'PUT', body: 'v', token: 'the-writer' })).status).toBe(200);
    expect((await call(`${server.api}/${bucket}`, { token: 'the-secret' })).status).toBe(200);
  });
});
