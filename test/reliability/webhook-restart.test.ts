import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { call, createBucket, json } from '../helpers/http.js';
import { type RunningServer, startServer } from '../helpers/server.js';
import { startReceiver } from '../helpers/webhook-receiver.js';

const ADMIN = 'restart-admin';
const auth = { authorization: `Bearer ${ADMIN}` };
const DELIVERED = { timeout: 20_000, interval: 100 };

/**
 * The delivery position is stored, and moves only after the receiver's 2xx: a `kill -9` and a
 * restart on the same SQLite file deliver what was not yet acknowledged and repeat nothing that was.
 */
describe('webhooks across kill -9 and restart (SQLite)', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'kvb-hook-restart-'));
  let server: RunningServer | undefined;
  afterAll(async () => {
    await server?.stop({ keepData: true });
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('goes on from the stored position after a crash, with changes made while the receiver was down', async () => {
    // The receiver refuses everything at first: the changes wait, unacknowledged, when the server dies.
    const receiver = await startReceiver(() => 503);
    try {
      server = await startServer({ dataDir, args: ['--webhook-allow-private', '--webhook-timeout', '1'] });
      const bucket = await createBucket(server.api, { secret_key: ADMIN });
      const added = await call(`${server.api}/webhooks/${bucket}`, { method: 'POST', ...json({ url: receiver.url }, auth) });
      expect(added.status, added.text).toBe(201);
      const put = async (key: string) => {
        const res = await call(`${server!.api}/${bucket}/${key}`, { method: 'PUT', body: key, headers: auth });
        return Number(res.headers.get('kvb-revision'));
      };
      receiver.answerWith(() => 200);
      const delivered = [await put('a'), await put('b')];
      await expect.poll(() => receiver.acknowledged().map((e) => e.rev), DELIVERED).toEqual(delivered);
      receiver.answerWith(() => 503);
      const waiting = [await put('c'), await put('d')];
      await expect.poll(() => receiver.received.length, DELIVERED).toBeGreaterThan(1);
      await server.stop({ keepData: true, signal: 'SIGKILL' });

      receiver.answerWith(() => 200);
      server = await startServer({ dataDir, args: ['--webhook-allow-private', '--webhook-timeout', '1'] });
      const after = await put('e');
      await expect.poll(() => receiver.acknowledged().map((e) => e.rev), DELIVERED).toEqual([...delivered, ...waiting, after]);
    } finally {
      await receiver.close();
    }
  });
});
