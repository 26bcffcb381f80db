import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AppServer, startAppServer } from '../helpers/app-server.js';
import { call, createBucket, expectError, json } from '../helpers/http.js';
import { testClock } from '../helpers/test-clock.js';
import { watchStream } from '../helpers/watch-stream.js';

/**
 * A key that has expired but that the sweeper has not removed yet is absent: deleting it is
 * refused (404) and writes nothing, whichever way it is deleted; the sweeper then records its
 * expiry as the server's `expire`, at a revision of its own.
 */
const clock = testClock();
let server: AppServer;
beforeAll(async () => {
  // The sweeper runs only when the test calls it.
  server = await startAppServer({ clock: clock.now, config: { sweepIntervalSeconds: 86_400 } });
});
afterAll(async () => {
  await server?.stop();
});

const admin = { authorization: 'Bearer admin' };

async function state(bucket: string) {
  const policy = await call(`${server.api}/${bucket}`, { headers: admin });
  expect(policy.status, policy.text).toBe(200);
  const listing = await call(`${server.api}/${bucket}/`, { headers: admin });
  return {
    revision: listing.headers.get('kvb-revision'),
    keys: policy.headers.get('kvb-usage-keys'),
    bytes: policy.headers.get('kvb-usage-bytes'),
  };
}

async function historyOf(bucket: string, key: string): Promise<Array<[string, string]>> {
  const res = await call(`${server.api}/${bucket}/${key}?history=true`, { headers: admin });
  expect(res.status, res.text).toBe(200);
  return res.text
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as { operation: string; actor: { kind: string } })
    .map((line) => [line.operation, line.actor.kind]);
}

describe('deleting a key that expired but is not swept yet', () => {
  it('is refused 404 by DELETE, plain or conditional, and writes no revision, history or event', async () => {
    clock.set(Date.now());
    const bucket = await createBucket(server.api, { secret_key: 'admin' });
    for (const key of ['gone', 'p/gone']) {
      const res = await call(`${server.api}/${bucket}/${key}?ttl=1`, { method: 'PUT', body: 'x', headers: admin });
      expect(res.status, res.text).toBe(200);
    }
    expect((await call(`${server.api}/${bucket}/live`, { method: 'PUT', body: 'y', headers: admin })).status).toBe(200);
    const watch = await watchStream(`${server.api}/${bucket}/?watch=true&format=jsonl`, { headers: admin });
    try {
      clock.advance(2_000);
      const before = await state(bucket);
      expectError(await call(`${server.api}/${bucket}/gone`, { method: 'DELETE', headers: admin }), 404, 'not_found');
      const conditional = await call(`${server.api}/${bucket}/gone`, { method: 'DELETE', headers: { ...admin, 'if-match': '*' } });
      expectError(conditional, 412, 'precondition_failed');
      expect(await state(bucket)).toEqual(before);
      // A transaction's delete and a prefix delete find nothing to delete either.
      const txn = await call(`${server.api}/${bucket}`, {
        method: 'POST',
        ...json({ txn: [{ delete: 'gone' }, { delete_prefix: 'p/' }] }, admin),
      });
      expect(txn.status, txn.text).toBe(200);
      expect(txn.json()).toMatchObject({ results: [null, { deleted: 0 }] });
      expect((await state(bucket)).keys).toBe(before.keys);
      expect((await state(bucket)).bytes).toBe(before.bytes);
      expect(await historyOf(bucket, 'gone')).toEqual([['set', 'secret']]);
      expect(await historyOf(bucket, 'p/gone')).toEqual([['set', 'secret']]);
      // The sweep records each expiry as the server's, and watchers see an expire, never a delete.
      for (let swept = -1; swept !== 0; ) swept = await server.store.maintenance.sweepExpired(clock.now(), 100);
      await expect.poll(() => watch.events.filter((e) => e.type === 'expire').map((e) => e.key)).toEqual(['gone', 'p/gone']);
      expect(watch.events.filter((e) => e.type === 'delete')).toEqual([]);
      expect(await historyOf(bucket, 'gone')).toEqual([
        ['expire', 'server'],
        ['set', 'secret'],
      ]);
      expect((await state(bucket)).keys).toBe('1');
    } finally {
      watch.stop();
    }
  });
});
