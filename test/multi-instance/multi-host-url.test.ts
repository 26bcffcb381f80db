import { createServer } from 'node:net';
import { execa } from 'execa';
import { afterAll, describe, expect, it } from 'vitest';
import { parsePostgresHosts } from '../../src/store/postgres/postgres-hosts.js';
import { POSTGRES_URL, THROUGH_PGBOUNCER, dropSchema, postgresUrl, uniqueName } from '../helpers/backend.js';
import { call, createBucket } from '../helpers/http.js';
import { KVB_BIN, type RunningServer, startServer } from '../helpers/server.js';

/** A local port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  return typeof address === 'object' && address ? address.port : 1;
}

/** POSTGRES_URL with `before` listed ahead of its own host (libpq's multi-host form). */
function withHostBefore(before: string, params: Record<string, string>): string {
  const parsed = parsePostgresHosts(POSTGRES_URL!);
  const own = parsed.hosts[0]!;
  const url = parsed.urlFor(own);
  const hostText = `${own.host}${own.port === undefined ? '' : `:${own.port}`}`;
  return postgresUrl(params, url.replace(`@${hostText}/`, `@${before},${hostText}/`).replace(`//${hostText}/`, `//${before},${hostText}/`));
}

// Without a failover manager: the host list and the read-write check against the one test PostgreSQL
// (test/multi-instance/failover.test.ts runs them through real failovers). Direct connections only:
// PgBouncer refuses the `options` startup parameter the read-only case needs.
describe.skipIf(!POSTGRES_URL || THROUGH_PGBOUNCER)(
  `multi-host PostgreSQL URLs${THROUGH_PGBOUNCER ? ' (SKIPPED through PgBouncer: runs in the postgres project)' : POSTGRES_URL ? '' : ' (SKIPPED: KVB_TEST_POSTGRES_URL is not set)'}`,
  () => {
    const schemas: string[] = [];
    const servers: RunningServer[] = [];
    afterAll(async () => {
      await Promise.all(servers.map((s) => s.stop()));
      for (const schema of schemas) await dropSchema(schema);
    });

    it('skips a host that refuses connections and serves from the next one, naming both in its start-up line', async () => {
      const schema = uniqueName('kvb_multihost');
      schemas.push(schema);
      const dead = await closedPort();
      const server = await startServer({ db: withHostBefore(`127.0.0.1:${dead}`, { schema, target_session_attrs: 'read-write' }) });
      servers.push(server);
      expect(server.logs()).toMatch(new RegExp(`hosts 127\\.0\\.0\\.1:${dead}, [^ ]+ \\(target_session_attrs=read-write\\)`));
      const bucket = await createBucket(server.api);
      expect((await call(`${server.api}/${bucket}/k`, { method: 'PUT', body: 'v' })).status).toBe(200);
      expect((await call(`${server.api}/${bucket}/k`)).text).toBe('v');
      expect((await call(`${server.url}/ready`)).status).toBe(200);
    });

    it('with target_session_attrs=read-write a read-only server is refused: kvb serve says why and exits 1', async () => {
      const dead = await closedPort();
      const db = withHostBefore(`127.0.0.1:${dead}`, {
        target_session_attrs: 'read-write',
        options: '-c default_transaction_read_only=on',
        schema: uniqueName('kvb_ro'),
      });
      const result = await execa('node', [KVB_BIN, 'serve', '--port', '0', '--db', db], { reject: false, timeout: 20_000 });
      expect(result.exitCode).toBe(1);
      expect(result.stderr.trim().split('\n')).toEqual([
        expect.stringMatching(
          new RegExp(
            `^kvb: cannot open PostgreSQL at 127\\.0\\.0\\.1:${dead}, [^ ]+: no read-write PostgreSQL server among the hosts \\(127\\.0\\.0\\.1:${dead}: connect ECONNREFUSED [^;]+; [^ ]+: is read-only \\(a standby\\?\\)\\)$`,
          ),
        ),
      ]);
    });

    it('refuses a target_session_attrs kvb cannot write through, before connecting', async () => {
      const result = await execa(
        'node',
        [KVB_BIN, 'serve', '--port', '0', '--db', withHostBefore('127.0.0.1:1', { target_session_attrs: 'standby' })],
        { reject: false, timeout: 20_000 },
      );
      expect(result.exitCode).toBe(1);
      expect(result.stderr).toMatch(/target_session_attrs=standby is not supported: kvb writes/);
    });
  },
);
