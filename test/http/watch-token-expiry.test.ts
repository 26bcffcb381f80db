import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, createBucket } from '../helpers/http.js';
import { type AppServer, startAppServer } from '../helpers/app-server.js';
import { testClock } from '../helpers/test-clock.js';

/**
 * A watch opened with a temporary token ends at the token's `exp`. The once-a-second
 * credential re-check (kept, for rotations) let a stream deliver a change committed 0.6 s after
 * exp on PostgreSQL. Runs on every backend. The token expires when the test moves the server's clock
 * to its `exp`.
 */
let server: AppServer;
const clock = testClock();
beforeAll(async () => {
  server = await startAppServer({ clock: clock.now });
});
afterAll(async () => {
  await server.stop();
});

describe('Watching with a temporary token', () => {
  it('no change written after the token expired is delivered, and the stream ends with closed', async () => {
    const bucket = await createBucket(server.api, { secret_key: 'S', signing_key: 'K' });
    const admin = { authorization: 'Bearer S' };
    const minted = await call(`${server.api}/${bucket}/tokens/`, {
      method: 'POST',
      headers: admin,
      body: new URLSearchParams({ prefix: 'k', permissions: 'read', ttl: '60' }),
    });
    expect(minted.status, minted.text).toBe(200);
    const { access_token: token } = minted.json() as { access_token: string };
    const exp = (JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()) as { exp: number }).exp * 1000;

    const res = await fetch(`${server.api}/${bucket}/?watch=true&format=jsonl`, { headers: { authorization: `Bearer ${token}` } });
    expect(res.status).toBe(200);
    const lines: Array<Record<string, unknown>> = [];
    let ended = false;
    const reading = (async () => {
      let buffer = '';
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        buffer += Buffer.from(chunk).toString('utf8');
        let at: number;
        while ((at = buffer.indexOf('\n')) !== -1) {
          lines.push(JSON.parse(buffer.slice(0, at)) as Record<string, unknown>);
          buffer = buffer.slice(at + 1);
        }
      }
      ended = true;
    })();

    // Each write recorded with the server's time it was sent at and the revision it got.
    const writes: Array<{ sentAt: number; rev: number }> = [];
    const write = async (i: number) => {
      const sentAt = clock.now();
      const put = await call(`${server.api}/${bucket}/k${i}`, { method: 'PUT', body: String(i), headers: admin });
      expect(put.status).toBe(200);
      writes.push({ sentAt, rev: Number(put.headers.get('kvb-revision')) });
    };
    for (let i = 0; i < 3; i++) await write(i);
    // The event: the stream has sent the writes made while the token was valid.
    await expect.poll(() => lines.filter((l) => l.type === 'set').length, { timeout: 15_000, interval: 50 }).toBe(3);
    clock.set(exp);
    // Writes one after another until the stream has ended (and at least two at or after exp).
    for (let i = 3; !ended || i < 5; i++) {
      await write(i);
      if (i > 10_000) throw new Error('the stream never ended');
    }
    await reading;
    const delivered = lines.filter((l) => l.type === 'set').map((l) => Number(l.rev));
    const sentAfterExp = new Set(writes.filter((w) => w.sentAt >= exp).map((w) => w.rev));
    expect(sentAfterExp.size).toBeGreaterThanOrEqual(2);
    expect(delivered.filter((rev) => sentAfterExp.has(rev))).toEqual([]);
    expect(delivered.length).toBeGreaterThan(0);
    expect(lines.at(-1)).toEqual({ type: 'closed', reason: 'the credential is no longer valid' });
  });
});
