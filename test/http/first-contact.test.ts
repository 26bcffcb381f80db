import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_BACKEND } from '../helpers/backend.js';
import { call, createBucket } from '../helpers/http.js';
import { type RunningServer, startServer } from '../helpers/server.js';
import { latencies, percentile } from '../helpers/latency.js';

/**
 * The first request with a fresh, valid key is answered, however many arrive at once,
 * while a source flooding wrong credentials is refused (429) without delaying anyone else. Every
 * first contact costs one scrypt run (the bucket's keys share a salt); the runs are shared fairly
 * between client addresses. On loopback a second client address is 127.0.0.2.
 *
 * Spawned servers: hundreds of clients at once, and a restart. In this process the clients'
 * connections would share the server's event loop (500 at once were reset there).
 */

interface Reply {
  status: number;
  retryAfter: string | undefined;
  ms: number;
}

/** One GET from a chosen local address (its own connection), with a Bearer credential. */
function getFrom(localAddress: string, url: string, token: string): Promise<Reply> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = http.get(url, { localAddress, agent: false, headers: { authorization: `Bearer ${token}` } }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode!, retryAfter: res.headers['retry-after'], ms: performance.now() - started }));
    });
    req.on('error', reject);
  });
}

describe(`first contact under load (${TEST_BACKEND})`, () => {
  it('64 new buckets, each first used with its fresh key, all at once: every one is answered, none 429', { timeout: 120_000 }, async () => {
    const server = await startServer();
    try {
      // One key a bucket keeps creation (one scrypt run per key) short. Creating a bucket verifies
      // nothing: the request below is each key's first use.
      const buckets = await Promise.all(
        Array.from({ length: 64 }, async (_, i) => {
          const key = `reader-${i}-${randomBytes(6).toString('hex')}`;
          return { id: await createBucket(server.api, { read_key: key }), key };
        }),
      );
      const started = performance.now();
      const answers = await Promise.all(buckets.map(({ id, key }) => getFrom('127.0.0.1', `${server.api}/${id}/missing`, key)));
      const slowest = Math.max(...answers.map((a) => a.ms));
      console.log(
        `first contact, 64 buckets at once (${TEST_BACKEND}): slowest ${slowest.toFixed(0)} ms, all in ${(performance.now() - started).toFixed(0)} ms`,
      );
      expect(answers.map((a) => a.status)).toEqual(answers.map(() => 404));
    } finally {
      await server.stop();
    }
  });

  describe('a source flooding wrong credentials', () => {
    let server: RunningServer;
    let flooded: string;
    let quietBucket: string;
    beforeAll(async () => {
      // A queue allowance per address short enough that 500 guesses are refused on any machine
      // (one scrypt run would have to take under 24 ms), long enough that a queue is left to be fair about.
      server = await startServer({ args: ['--verification-wait', '6'] });
      [flooded, quietBucket] = await Promise.all([
        createBucket(server.api, { read_key: 'flooded-reader' }),
        createBucket(server.api, { read_key: 'quiet-reader' }),
      ]);
    });
    afterAll(async () => {
      await server?.stop();
    });

    it("gets 429s, while another address's first contact is answered in its turn and cached requests never wait for the queue", {
      timeout: 120_000,
    }, async () => {
      const cachedUrl = `${server.api}/${quietBucket}/missing`;
      await latencies(cachedUrl, 'quiet-reader', 5); // verified once, cached from here on
      const quiet = await latencies(cachedUrl, 'quiet-reader', 60);
      // A bucket whose key 127.0.0.1 has never presented: its first contact happens during the flood.
      const fresh = await createBucket(server.api, { read_key: 'fresh-reader' });

      const answered = new Map<number, number>();
      const flood = Array.from({ length: 500 }, () =>
        getFrom('127.0.0.2', `${server.api}/${flooded}/k`, randomBytes(12).toString('hex')).then((reply) => {
          answered.set(reply.status, (answered.get(reply.status) ?? 0) + 1);
          return reply;
        }),
      );
      // Once every guess has arrived, each is either answered (429 at once) or queued for its hash.
      const queue = async () => {
        const text = (await call(`${server.url}/metrics`)).text;
        const gauge = (name: string) => Number(new RegExp(`^${name} (\\d+)`, 'm').exec(text)?.[1]);
        return gauge('kvb_credential_verifications_running') + gauge('kvb_credential_verifications_waiting');
      };
      const answeredSoFar = () => [...answered.values()].reduce((a, b) => a + b, 0);
      await expect.poll(async () => (await queue()) + answeredSoFar(), { timeout: 60_000, interval: 50 }).toBe(500);
      const guessesDoneAtStart = answered.get(401) ?? 0;
      // The other address's first contact, and cached requests (which never queue for a hash:
      // all of them are answered while guesses still wait), both during the flood.
      const cached = latencies(cachedUrl, 'quiet-reader', 60).then((ms) => ({ ms, guessesLeft: 500 - answeredSoFar() }));
      const first = await getFrom('127.0.0.1', `${server.api}/${fresh}/missing`, 'fresh-reader');
      const guessesDoneAtEnd = answered.get(401) ?? 0;
      const { ms: during, guessesLeft: guessesLeftAfterCached } = await cached;
      const costMs = Number(/^kvb_credential_verification_seconds (\S+)/m.exec((await call(`${server.url}/metrics`)).text)?.[1]) * 1000;
      const floodReplies = await Promise.all(flood);

      const statuses = new Map<number, number>();
      for (const r of floodReplies) statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
      const figures =
        `first contact during the flood ${first.ms.toFixed(0)} ms (one verification about ${costMs.toFixed(0)} ms); of the flood's ` +
        `${statuses.get(401) ?? 0} admitted guesses ${guessesDoneAtStart} were verified before it, ${guessesDoneAtEnd - guessesDoneAtStart} during it; ` +
        `${guessesLeftAfterCached} still waiting after 60 cached requests; ` +
        `cached quiet p50 ${percentile(quiet, 50).toFixed(1)} ms, flooded p50 ${percentile(during, 50).toFixed(1)} ms; flood statuses ${JSON.stringify([...statuses])}`;
      console.log(figures);
      expect(first.status, figures).toBe(404);
      // The flooding address got refusals with a Retry-After, and otherwise 401 (wrong credential).
      expect(statuses.get(429) ?? 0, figures).toBeGreaterThan(0);
      expect([...statuses.keys()].sort(), figures).toEqual([401, 429].filter((s) => statuses.has(s)));
      for (const r of floodReplies) if (r.status === 429) expect(Number(r.retryAfter)).toBeGreaterThanOrEqual(1);
      // Cached requests did not wait for the queue: the flood was still waiting when they were all answered.
      expect(guessesLeftAfterCached, figures).toBeGreaterThan(0);
      // Fair turns, checked by order: the flood still had guesses queued when the other address's
      // first contact came, and that contact did not wait for them (first come, first served would
      // have answered every one of them before it).
      const queuedAtStart = (statuses.get(401) ?? 0) - guessesDoneAtStart;
      expect(queuedAtStart, figures).toBeGreaterThanOrEqual(4);
      expect(guessesDoneAtEnd - guessesDoneAtStart, figures).toBeLessThan(queuedAtStart);
      // Once its queue drained, the flooding address's own valid key is answered too.
      expect((await getFrom('127.0.0.2', `${server.api}/${flooded}/k`, 'flooded-reader')).status).toBe(404);
    });
  });

  it('200 clients with the keys of 50 buckets reconnect to a freshly started server at once: all are answered', {
    timeout: 180_000,
  }, async () => {
    const first = await startServer();
    let second: RunningServer | undefined;
    try {
      // Each bucket has one key (its secret key, which reads and writes), used by four clients.
      const buckets = await Promise.all(
        Array.from({ length: 50 }, async (_, i) => {
          const key = `s-${i}-${randomBytes(4).toString('hex')}`;
          return { id: await createBucket(first.api, { secret_key: key }), key };
        }),
      );
      await first.stop({ keepData: true });
      second = await startServer({ db: first.db });
      const server = second;
      // Client c uses bucket c % 50, half of them reading, half writing, each on its own connection:
      // 50 credentials the new server has never verified, each presented by four clients at once.
      const started = performance.now();
      const answers = await Promise.all(
        Array.from({ length: 200 }, (_, c) => {
          const b = buckets[c % 50]!;
          return c % 4 < 2 ? getFrom('127.0.0.1', `${server.api}/${b.id}/missing`, b.key) : putFrom(`${server.api}/${b.id}/k${c}`, b.key);
        }),
      );
      const slowest = Math.max(...answers.map((a) => a.ms));
      console.log(
        `restart, 200 clients of 50 buckets (${TEST_BACKEND}): slowest ${slowest.toFixed(0)} ms, all in ${(performance.now() - started).toFixed(0)} ms`,
      );
      expect(answers.map((a) => a.status)).toEqual(Array.from({ length: 200 }, (_, c) => (c % 4 < 2 ? 404 : 200)));
    } finally {
      await second?.stop();
      await first.stop();
    }
  });
});

/** One PUT on its own connection with a Bearer credential. */
function putFrom(url: string, token: string): Promise<Reply> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      { method: 'PUT', agent: false, headers: { authorization: `Bearer ${token}`, 'content-type': 'text/plain' } },
      (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode!, retryAfter: res.headers['retry-after'], ms: performance.now() - started }));
      },
    );
    req.on('error', reject);
    req.end('v');
  });
}
