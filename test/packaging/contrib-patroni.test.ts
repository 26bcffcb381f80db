import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { afterAll, describe, expect, it } from 'vitest';
import { kvb } from '../helpers/cli.js';
import { startServer } from '../helpers/server.js';

/**
 * contrib/patroni/demo.sh starts etcd and two Patroni nodes from the shipped node1.yml and
 * node2.yml on one host; kvb, given the URL it prints, writes and reads through the primary.
 * Ports from 15500: clear of the CI cluster's 15400–15431. The cluster takes about 10 s to elect
 * on an idle machine (a minute at a load of 20), so this is one test, started once.
 */
const DEMO = fileURLToPath(new URL('../../contrib/patroni/demo.sh', import.meta.url));
const installed = (cmd: string) => spawnSync('sh', ['-c', `command -v ${cmd}`]).status === 0;
const missing = ['patroni', 'etcd'].filter((cmd) => !installed(cmd));
if (missing.length > 0) console.log(`contrib/patroni test: SKIPPED (${missing.join(', ')} not installed)`);

let stop: string | undefined;
afterAll(async () => {
  if (stop) await execa(stop, { reject: false, timeout: 60_000 });
}, 90_000);

describe('contrib/patroni', () => {
  it.skipIf(missing.length > 0)(
    'demo.sh starts etcd and two Patroni nodes from the shipped files, and kvb writes and reads through the primary',
    { timeout: 300_000 },
    async () => {
      const demo = await execa(DEMO, ['15500'], { reject: false, timeout: 240_000 });
      stop = /^KVB_DEMO_DIR=(\S+)$/m.exec(demo.stdout)?.[1]?.concat('/stop');
      expect(demo.exitCode, demo.stderr).toBe(0);
      const db = /^KVB_DB='([^']+)'$/m.exec(demo.stdout)?.[1];
      expect(db).toMatch(/^postgres:\/\/postgres:[^@]+@127\.0\.0\.1:15520,127\.0\.0\.1:15521\/postgres\?target_session_attrs=read-write/);
      const server = await startServer({ db: db! });
      try {
        const created = await kvb([
          'create-bucket',
          '--email',
          'ops@example.com',
          '--secret-key',
          'ha-secret',
          '--read-key',
          'r',
          '--write-key',
          'w',
          '--url',
          server.url,
        ]);
        expect(created.exitCode, created.stderr).toBe(0);
        const env = { KVB_URL: server.url, KVB_BUCKET: created.out.trim(), KVB_TOKEN: 'ha-secret' };
        expect((await kvb(['set', 'through/patroni', 'hello'], { env })).exitCode).toBe(0);
        expect(await kvb(['get', 'through/patroni'], { env })).toMatchObject({ exitCode: 0, out: 'hello' });
      } finally {
        await server.stop();
      }
    },
  );
});
