import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { POSTGRES_URL, SERVER_POSTGRES_URL, THROUGH_PGBOUNCER, dropSchema, postgresUrl, uniqueName } from '../helpers/backend.js';
import { call, createBucket, json } from '../helpers/http.js';
import { type RunningServer, startServer } from '../helpers/server.js';
import { watchStream } from '../helpers/watch-stream.js';

describe.skipIf(!POSTGRES_URL)(
  `history across two instances on one PostgreSQL schema${THROUGH_PGBOUNCER ? ' through PgBouncer' : ''}${POSTGRES_URL ? '' : ' (SKIPPED: KVB_TEST_POSTGRES_URL is not set)'}`,
  () => {
    const schema = uniqueName('kvb_history');
    let a: RunningServer;
    let b: RunningServer;
    beforeAll(async () => {
      const db = postgresUrl({ schema }, SERVER_POSTGRES_URL);
      a = await startServer({ db });
      b = await startServer({ db });
    });
    afterAll(async () => {
      await Promise.all([a?.stop(), b?.stop()]);
      await dropSchema(schema);
    });

    it('a rollback on one instance is seen by watchers on the other as its sets and deletes, in one revision', {
      timeout: 120_000,
    }, async () => {
      const bucket = await createBucket(a.api, { default_ttl: '0' });
      const txn = (ops: unknown[]) => call(`${a.api}/${bucket}`, { method: 'POST', ...json({ txn: ops }) });
      expect(
        (
          await txn([
            { set: 'cfg/a', value: 'a1' },
            { set: 'cfg/b', value: 'b1' },
            { set: 'other', value: 'o1' },
          ])
        ).status,
      ).toBe(204);
      const good = Number((await call(`${a.api}/${bucket}/?format=json`)).headers.get('kvb-revision'));
      expect(
        (await txn([{ set: 'cfg/a', value: 'a2' }, { delete: 'cfg/b' }, { set: 'cfg/c', value: 'c2' }, { set: 'other', value: 'o2' }]))
          .status,
      ).toBe(204);

      const watcher = await watchStream(`${b.api}/${bucket}/?watch=true&format=jsonl&values=true`);
      await expect.poll(() => watcher.events.some((x) => x.type === 'sync'), { timeout: 30_000 }).toBe(true);
      const rolled = await call(`${a.api}/${bucket}?rollback=${good}&prefix=cfg/`, { method: 'POST' });
      expect(rolled.status, rolled.text).toBe(200);
      const revision = (rolled.json() as { revision: number }).revision;
      await expect
        .poll(() => watcher.events.filter((x) => x.rev === revision && x.type !== 'progress').length, { timeout: 30_000 })
        .toBe(3);
      const seen = watcher.events
        .filter((x) => x.rev === revision && ['set', 'delete'].includes(String(x.type)))
        .map((x) => [x.type, x.key, x.value ?? null])
        .sort((x, y) => String(x[1]).localeCompare(String(y[1])));
      expect(seen).toEqual([
        ['set', 'cfg/a', 'a1'],
        ['set', 'cfg/b', 'b1'],
        ['delete', 'cfg/c', null],
      ]);
      watcher.stop();
      // Instance B reads the same history: the key's rollback change, and the state before it.
      const history = await call(`${b.api}/${bucket}/cfg/a?history=true`);
      expect(history.text.split('\n')[0]).toContain(`"rev":${revision},"operation":"rollback"`);
      expect((await call(`${b.api}/${bucket}/other`)).text).toBe('o2');
      expect((await call(`${b.api}/${bucket}/cfg/c?rev=${revision - 1}`)).text).toBe('c2');
    });
  },
);
