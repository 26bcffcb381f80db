import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, createBucket, expectError } from '../helpers/http.js';
import { type RunningServer, startServer } from '../helpers/server.js';

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

  it('a flood of wrong credentials gets 429 + Retry-After past the bound, and cached requests are answered while the flood still waits for its hashes', {
    timeout: 120_000,
  }, async () => {
    const url = `${server.api}/${bucket}/missing`;
    // Verified once, cached from here on.
    expect((await call(url, { token: 'the-reader' })).status).toBe(404);

    // 300 guesses at once: far more than the 1 s allowance (--verification-wait 1) on any machine's speed.
    const statuses = new Map<number, number>();
    let answeredGuesses = 0;
    let retryAfter: string | null = null;
    const guesses = Array.from({ length: 300 }, async () => {
      const answer = await call(url, { token: randomBytes(12).toString('hex') });
      statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
      answeredGuesses++;
      if (answer.status === 429) retryAfter = answer.headers.get('retry-after');
    });
    // Once every guess has arrived and is either answered or queued for its hash (the server's own
    // gauges), the cached credential is used, not after a fixed time.
    const gauges = async () => {
      const text = (await call(`${server.url}/metrics`)).text;
      const gauge = (name: string) => Number(new RegExp(`^${name} (\\d+)`, 'm').exec(text)?.[1]);
      return { running: gauge('kvb_credential_verifications_running'), waiting: gauge('kvb_credential_verifications_waiting') };
    };
    let queued = 0;
    await expect
      .poll(
        async () => {
          const { running, waiting } = await gauges();
          queued = running + waiting;
          return queued + answeredGuesses;
        },
        { timeout: 60_000, interval: 50 },
      )
      .toBe(300);
    // Cached requests never queue for a hash: sent while hashes are still queued, each is answered
    // before the last of them. By order, not by latency, so a loaded machine cannot fake a failure.
    expect(queued).toBeGreaterThan(0);
    const cached = await Promise.all(
      Array.from({ length: 20 }, async () => {
        const answer = await call(url, { token: 'the-reader' });
        return { status: answer.status, guessesLeft: 300 - answeredGuesses };
      }),
    );
    await Promise.all(guesses);

    const figures = `statuses ${JSON.stringify([...statuses])}; guesses left when each cached answer came: ${cached.map((c) => c.guessesLeft).join(' ')}`;
    expect(cached.map((c) => c.status)).toEqual(cached.map(() => 404));
    for (const c of cached) expect(c.guessesLeft, figures).toBeGreaterThan(0);
    expect(statuses.get(429) ?? 0, figures).toBeGreaterThan(0);
    expect(Number(retryAfter)).toBeGreaterThanOrEqual(1);
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
