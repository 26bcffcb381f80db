import { spawnSync } from 'node:child_process';
import { chmodSync, chownSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type ResultPromise, execa } from 'execa';
import { afterAll, describe, expect, it } from 'vitest';
import { POSTGRES_URL, dropSchema, uniqueName } from '../helpers/backend.js';
import { kvb } from '../helpers/cli.js';
import { startServer } from '../helpers/server.js';

/**
 * contrib/pgbouncer/pgbouncer.ini is the file operators copy: PgBouncer is started from it as
 * shipped, with only what must differ in a test replaced: a free port, the paths of its own files
 * and its user list. kvb then writes and reads through it, and sees the pooler.
 */
const INI = fileURLToPath(new URL('../../contrib/pgbouncer/pgbouncer.ini', import.meta.url));
const hasPgbouncer = spawnSync('sh', ['-c', 'command -v pgbouncer'], { encoding: 'utf8' }).status === 0;
const postgres = POSTGRES_URL ? new URL(POSTGRES_URL) : undefined;
// The shipped file sends every database to 127.0.0.1:5432: the test's PostgreSQL must be that one.
const localPostgres = postgres !== undefined && postgres.hostname === '127.0.0.1' && (postgres.port || '5432') === '5432';
const skip = !hasPgbouncer || !localPostgres;
if (skip)
  console.log(
    `contrib/pgbouncer test: SKIPPED (${hasPgbouncer ? 'needs KVB_TEST_POSTGRES_URL on 127.0.0.1:5432' : 'pgbouncer is not installed'})`,
  );

const freePort = () =>
  new Promise<number>((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });

let dir: string | undefined;
let bouncer: ResultPromise | undefined;
const schemas: string[] = [];
afterAll(async () => {
  bouncer?.kill('SIGTERM');
  await bouncer?.catch(() => undefined);
  for (const schema of schemas) await dropSchema(schema);
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('contrib/pgbouncer', () => {
  it.skipIf(skip)(
    'PgBouncer runs from the shipped pgbouncer.ini (transaction pooling, SCRAM logins) and kvb writes and reads through it',
    { timeout: 120_000 },
    async () => {
      dir = mkdtempSync(join(tmpdir(), 'kvb-contrib-pgbouncer-'));
      const port = await freePort();
      const user = decodeURIComponent(postgres!.username || 'postgres');
      const password = 'contrib-test-password';
      writeFileSync(join(dir, 'userlist.txt'), `"${user}" "${password}"\n`);
      // The shipped file line for line; only these four settings take the test's values (each must
      // be there to be replaced: a renamed setting fails here rather than passing unnoticed).
      let ini = readFileSync(INI, 'utf8');
      for (const [name, value] of Object.entries({
        listen_port: String(port),
        auth_file: `${dir}/userlist.txt`,
        logfile: `${dir}/pgbouncer.log`,
        pidfile: `${dir}/pgbouncer.pid`,
      })) {
        const line = new RegExp(`^${name} = .*$`, 'm');
        expect(ini, name).toMatch(line);
        ini = ini.replace(line, `${name} = ${value}`);
      }
      writeFileSync(join(dir, 'pgbouncer.ini'), ini);
      // PgBouncer refuses to run as root: as root, it runs as postgres (-u), which must read its files.
      const asRoot = userInfo().uid === 0;
      if (asRoot) {
        const id = (flag: string) => Number(spawnSync('id', [flag, 'postgres'], { encoding: 'utf8' }).stdout.trim());
        chmodSync(dir, 0o755);
        for (const name of ['', 'userlist.txt', 'pgbouncer.ini']) chownSync(join(dir, name), id('-u'), id('-g'));
      }
      bouncer = execa('pgbouncer', [...(asRoot ? ['-u', 'postgres'] : []), join(dir, 'pgbouncer.ini')], { reject: false, stdio: 'pipe' });
      const url = `postgres://${encodeURIComponent(user)}:${password}@127.0.0.1:${port}${postgres!.pathname}`;
      await expect
        .poll(() => spawnSync('pg_isready', ['-q', '-h', '127.0.0.1', '-p', String(port)]).status, { timeout: 20_000, interval: 100 })
        .toBe(0);
      // A wrong password is refused: the SCRAM login of the shipped auth_type is in force.
      const refused = spawnSync(
        'psql',
        [`postgres://${encodeURIComponent(user)}:wrong@127.0.0.1:${port}${postgres!.pathname}`, '-Atc', 'select 1'],
        { encoding: 'utf8' },
      );
      expect(refused.status).not.toBe(0);
      expect(`${refused.stderr}`).toMatch(/password authentication failed|SASL authentication failed/);

      const schema = uniqueName('kvb_contrib_bouncer');
      schemas.push(schema);
      const server = await startServer({ db: `${url}?schema=${schema}` });
      try {
        expect(server.logs()).toMatch(/named prepared statements not used \(auto: .*assuming a transaction pooler\)/);
        const created = await kvb([
          'create-bucket',
          '--email',
          'ops@example.com',
          '--secret-key',
          'contrib-secret',
          '--read-key',
          'r',
          '--write-key',
          'w',
          '--url',
          server.url,
        ]);
        expect(created.exitCode, created.stderr).toBe(0);
        const env = { KVB_URL: server.url, KVB_BUCKET: created.out.trim(), KVB_TOKEN: 'contrib-secret' };
        expect((await kvb(['set', 'through/pgbouncer', 'hello'], { env })).exitCode).toBe(0);
        const got = await kvb(['get', 'through/pgbouncer'], { env });
        expect(got).toMatchObject({ exitCode: 0, out: 'hello' });
      } finally {
        await server.stop();
      }
      // The pool really is PgBouncer's: it counted kvb's logins on its own log.
      expect(readFileSync(join(dir, 'pgbouncer.log'), 'utf8')).toMatch(/login attempt: db=\S+ user=\S+/);
    },
  );
});
