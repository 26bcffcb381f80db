import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { POSTGRES_URL, SERVER_POSTGRES_URL, THROUGH_PGBOUNCER, dropSchema, postgresUrl, uniqueName } from '../helpers/backend.js';
import { call, createBucket } from '../helpers/http.js';
import { type RunningServer, startServer, storedKeys } from '../helpers/server.js';

/**
 * Per-bucket quotas across instances: every write checks the quota against the usage it reads
 * under the bucket row lock, so writers racing on two instances can never overshoot it.
 */
describe.skipIf(!POSTGRES_URL)(
  `per-bucket quotas on two kvb serve instances${THROUGH_PGBOUNCER ? ' through PgBouncer' : ''}${POSTGRES_URL ? '' : ' (SKIPPED: KVB_TEST_POSTGRES_URL is not set)'}`,
  () => {
    const schema = uniqueName('kvb_quota');
    let a: RunningServer;
    let b: RunningServer;
    beforeAll(async () => {
      const db = postgresUrl({ schema }, SERVER_POSTGRES_URL);
      a = await startServer({ db, args: ['--max-keys-per-bucket', '100'] });
      b = await startServer({ db, args: ['--max-keys-per-bucket', '100'] });
    });
    afterAll(async () => {
      await Promise.all([a?.stop(), b?.stop()]);
      await dropSchema(schema);
    });

    it('32 concurrent writers of new keys on both instances end with exactly 100 keys and exactly 100 successful answers', {
      timeout: 120_000,
    }, async () => {
      const bucket = await createBucket(a.api);
      const statuses: number[] = [];
      // 32 writers, 5 new keys each (160 attempts), alternating instances.
      await Promise.all(
        Array.from({ length: 32 }, async (_, w) => {
          for (let i = 0; i < 5; i++) {
            const server = (w + i) % 2 === 0 ? a : b;
            const answer = await call(`${server.api}/${bucket}/w${w}/k${i}`, { method: 'PUT', body: 'x' });
            statuses.push(answer.status);
          }
        }),
      );
      expect(statuses.filter((s) => s === 200)).toHaveLength(100);
      expect(statuses.filter((s) => s === 507)).toHaveLength(60);
      expect(await storedKeys(a)).toHaveLength(100);
      const policy = await call(`${b.api}/${bucket}`);
      expect(policy.headers.get('kvb-usage-keys')).toBe('100');
    });
  },
);
