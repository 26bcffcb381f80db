import BetterSqlite3 from 'better-sqlite3';
import { execa } from 'execa';
import { existsSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { POSTGRES_URL, dropSchema, postgresUrl, uniqueName } from '../helpers/backend.js';
import { call, createBucket, expectError, json } from '../helpers/http.js';
import { KVB_BIN, type RunningServer, startServer } from '../helpers/server.js';

/** `kvb db …` opens the storage itself: no server, no client configuration. */
const db = (args: string[]) => execa('node', [KVB_BIN, 'db', ...args], { reject: false, env: { KVB_DB: '' } });
const bearer = (credential: string) => ({ authorization: `Bearer ${credential}` });
/** A server on `db`. */
const serve = (db: string) => startServer({ db });

let dir: string;
let sqliteFile: string;
let bucket: string;
let token: string;
const schemas: string[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'kvb-db-'));
  sqliteFile = join(dir, 'source.db');
  const server = await serve(sqliteFile);
  bucket = await createBucket(server.api, {
    secret_key: 'admin-secret',
    read_key: 'reader',
    write_key: 'writer',
    signing_key: 'sign-key',
    default_ttl: '0',
  });
  // Rotating the signing key once makes the generation 1: the dump must carry it.
  expect(
    (await call(`${server.api}/${bucket}`, { method: 'PATCH', ...json({ signing_key: 'sign-key-2' }, bearer('admin-secret')) })).status,
  ).toBeLessThan(300);
  expect(
    (
      await call(`${server.api}/${bucket}`, {
        method: 'POST',
        ...json(
          {
            txn: [
              { set: 'user/1', value: 'one' },
              { set: 'user/2', value: { n: 2 } },
              { set: 'other', value: 'x', ttl: 3600 },
            ],
          },
          bearer('writer'),
        ),
      })
    ).status,
  ).toBe(204);
  await call(`${server.api}/${bucket}/bin`, {
    method: 'PUT',
    body: Buffer.from([0, 255, 1]),
    headers: { ...bearer('writer'), 'content-type': 'application/octet-stream' },
  });
  const minted = await call(`${server.api}/${bucket}/tokens/`, {
    method: 'POST',
    headers: bearer('admin-secret'),
    body: new URLSearchParams({ prefix: 'user/', permissions: 'read,enumerate', ttl: '3600' }),
  });
  token = (minted.json() as { access_token: string }).access_token;
  await server.stop({ keepData: true });
}, 60_000);
afterAll(async () => {
  for (const schema of schemas) await dropSchema(schema);
});

/** Starts a server on `dbUrl` and checks that it serves the bucket exactly as before the move. */
async function servesTheSameBucket(dbUrl: string): Promise<void> {
  const server: RunningServer = await serve(dbUrl);
  try {
    expect((await call(`${server.api}/${bucket}/user/1`, { headers: bearer(token) })).text).toBe('one');
    expect((await call(`${server.api}/${bucket}/`, { headers: bearer(token) })).text).toBe('user/1\nuser/2\n');
    expectError(await call(`${server.api}/${bucket}/other`, { headers: bearer(token) }), 403, 'forbidden');
    expect((await call(`${server.api}/${bucket}/bin`, { headers: bearer('reader') })).body).toEqual(Buffer.from([0, 255, 1]));
    expect((await call(`${server.api}/${bucket}/user/2`, { headers: bearer('reader') })).text).toBe('{"n":2}');
    const other = await call(`${server.api}/${bucket}/other`, { headers: bearer('reader') });
    expect(other.headers.get('kvb-expires-at')).toMatch(/^\d{4}-/);
    expectError(await call(`${server.api}/${bucket}/user/1`), 401, 'unauthorized');
    expectError(await call(`${server.api}/${bucket}/user/1`, { headers: bearer('wrong') }), 401, 'unauthorized');
    expect((await call(`${server.api}/${bucket}/new`, { method: 'PUT', body: 'x', headers: bearer('writer') })).status).toBeLessThan(300);
    expect((await call(`${server.api}/${bucket}`, { headers: bearer('admin-secret') })).json()).toMatchObject({
      signing_key_generation: 1,
      default_ttl: 0,
    });
  } finally {
    await server.stop({ keepData: true });
  }
}

describe('kvb db check', () => {
  it('passes a healthy database and says what it holds', async () => {
    const res = await db(['check', '--db', sqliteFile]);
    expect(res.exitCode, res.stderr).toBe(0);
    expect(res.stderr).toContain('1 bucket, 4 keys');
  });
  it('fails (exit 1) on entries without a bucket, and on a file that is not there', async () => {
    const { default: Database } = await import('better-sqlite3');
    const broken = join(dir, 'broken.db');
    await execa('cp', [sqliteFile, broken]);
    const raw = new Database(broken);
    raw.prepare("insert into entries (bucket_id, key, type, value, expires_at) values ('gone', x'6b', 'text', x'76', null)").run();
    raw.close();
    const res = await db(['check', '--db', broken]);
    expect(res.exitCode).toBe(1);
    expect(res.stderr).toContain('1 entries belong to no bucket');
    expect((await db(['check', '--db', join(dir, 'missing.db')])).exitCode).toBe(1);
  });
});

describe('kvb db dump and restore', () => {
  it('dumps every bucket with its policy and keys to a 0600 file with a checksum trailer', async () => {
    const file = join(dir, 'all.dump');
    const res = await db(['dump', '--db', sqliteFile, '-o', file]);
    expect(res.exitCode, res.stderr).toBe(0);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const lines = readFileSync(file, 'utf8').trim().split('\n');
    expect(JSON.parse(lines[0]!)).toMatchObject({ kvb: 'dump', version: 4, backend: 'sqlite' });
    expect(JSON.parse(lines[1]!)).toMatchObject({ kvb: 'bucket', id: bucket, signing_key: 'sign-key-2', signing_key_generation: 1 });
    expect(JSON.parse(lines[1]!).secret_key_hash).toMatch(/\S{20,}/);
    expect(lines[1]).not.toContain('admin-secret');
    expect(JSON.parse(lines.at(-1)!)).toMatchObject({ kvb: 'end', buckets: 1, count: 4 });
  });

  it('restore refuses a dump cut short or altered (nothing written) and a non-empty target without --force', async () => {
    const file = join(dir, 'all.dump');
    const text = readFileSync(file, 'utf8');
    const cut = join(dir, 'cut.dump');
    writeFileSync(cut, text.slice(0, text.lastIndexOf('{"kvb":"end"')));
    const target = join(dir, 'target.db');
    // An empty kvb database to restore into.
    const s = await serve(target);
    await s.stop({ keepData: true });
    const refused = await db(['restore', cut, '--db', target]);
    expect(refused.exitCode).toBe(1);
    expect(refused.stderr).toMatch(/no end line/);
    const altered = join(dir, 'altered.dump');
    writeFileSync(altered, text.replace('"one"', '"ONE"'));
    expect((await db(['restore', altered, '--db', target])).stderr).toMatch(/sha256/);
    expect((await db(['check', '--db', target])).stderr).toContain('0 buckets, 0 keys');
    expect((await db(['restore', file, '--db', sqliteFile])).exitCode).toBe(1);
    const forced = await db(['restore', file, '--db', sqliteFile, '--force']);
    expect(forced.exitCode, forced.stderr).toBe(0);
    expect((await db(['check', '--db', sqliteFile])).stderr).toContain('1 bucket, 4 keys');
  }, 120_000);

  it('restore and migrate create a SQLite file that does not exist yet, as kvb serve does; a bad dump creates nothing', async () => {
    const file = join(dir, 'all.dump');
    const fresh = join(dir, 'new-dir', 'new.db');
    const restored = await db(['restore', '--db', fresh, file]);
    expect(restored.exitCode, restored.stderr).toBe(0);
    expect(restored.stderr).toContain(`creating a new SQLite database at ${fresh}`);
    expect(restored.stderr).toContain('restored 1 bucket, 4 keys');
    await servesTheSameBucket(fresh);

    const text = readFileSync(file, 'utf8');
    const cut = join(dir, 'cut-for-new.dump');
    writeFileSync(cut, text.slice(0, text.lastIndexOf('{"kvb":"end"')));
    const never = join(dir, 'never.db');
    const refused = await db(['restore', '--db', never, cut]);
    expect(refused.exitCode).toBe(1);
    expect(existsSync(never)).toBe(false);

    const migrated = join(dir, 'migrated.db');
    const dry = await db(['migrate', '--db', migrated, '--dry-run']);
    expect(dry.exitCode, dry.stderr).toBe(0);
    expect(dry.stdout.split('\n').filter(Boolean).length).toBeGreaterThan(3);
    expect(existsSync(migrated)).toBe(false);
    const applied = await db(['migrate', '--db', `sqlite:${migrated}`]);
    expect(applied.exitCode, applied.stderr).toBe(0);
    expect(applied.stderr).toContain(`applied ${dry.stdout.split('\n').filter(Boolean).length} migrations`);
    expect((await db(['migrate', '--db', migrated, '--dry-run'])).stderr).toContain('up to date');
    expect((await db(['check', '--db', migrated])).stderr).toContain('0 buckets, 0 keys');
    // Reading commands still take a missing file for the typo it is.
    expect((await db(['dump', '--db', join(dir, 'typo.db')])).stderr).toContain('no database at');
  }, 120_000);

  it.skipIf(!POSTGRES_URL)(
    'moves SQLite -> PostgreSQL -> SQLite: same credentials, tokens minted before the move still work',
    async () => {
      const schema = uniqueName('kvb_dbmove');
      schemas.push(schema);
      const pgUrl = postgresUrl({ schema });
      const file = join(dir, 'all.dump');
      // The target schema gets kvb's tables when a server (or the restore) first opens it.
      const restored = await db(['restore', file, '--db', pgUrl]);
      expect(restored.exitCode, restored.stderr).toBe(0);
      expect(restored.stderr).toContain('restored 1 bucket, 4 keys');
      await servesTheSameBucket(pgUrl);
      // And back: PostgreSQL (now with one key more) -> a fresh SQLite file.
      const back = join(dir, 'back.dump');
      expect((await db(['dump', '--db', pgUrl, '-o', back])).exitCode).toBe(0);
      const sqliteAgain = join(dir, 'again.db');
      const s = await serve(sqliteAgain);
      await s.stop({ keepData: true });
      const res = await db(['restore', back, '--db', sqliteAgain]);
      expect(res.exitCode, res.stderr).toBe(0);
      expect(res.stderr).toContain('restored 1 bucket, 5 keys');
      await servesTheSameBucket(sqliteAgain);
    },
    180_000,
  );
});

describe('kvb db backup', () => {
  it('copies a SQLite database to a 0600 file that passes integrity_check; refuses an existing target and PostgreSQL', async () => {
    const out = join(dir, 'backup.db');
    const res = await db(['backup', '--db', sqliteFile, '--out', out]);
    expect(res.exitCode, res.stderr).toBe(0);
    expect(res.stderr).toContain('integrity_check ok');
    expect(statSync(out).mode & 0o777).toBe(0o600);
    expect((await db(['check', '--db', out])).stderr).toMatch(/1 bucket, \d keys/);
    expect((await db(['backup', '--db', sqliteFile, '--out', out])).exitCode).toBe(1);
    expect((await db(['backup', '--db', 'postgres://x@127.0.0.1/y', '--out', join(dir, 'x.db')])).stderr).toMatch(/pg_dump/);
  });
});

describe('kvb db on a running SQLite server', () => {
  it('backup copies the live file under write load: the copy passes integrity_check and holds every write acknowledged before it began', {
    timeout: 180_000,
  }, async () => {
    const live = mkdtempSync(join(tmpdir(), 'kvb-live-'));
    const file = join(live, 'kvb.db');
    const server = await serve(file);
    try {
      const id = await createBucket(server.api);
      // About 25 MiB, so the copy takes several steps (16 MiB each) while the writers run.
      const big = 'b'.repeat(16 * 1024);
      for (let t = 0; t < 2; t++) {
        const txn = Array.from({ length: 800 }, (_, i) => ({ set: `fill/${t}/${i}`, value: big }));
        expect((await call(`${server.api}/${id}`, { method: 'POST', ...json({ txn }) })).status).toBe(204);
      }
      // Every key is written once, so its revision in the copy must be the one acknowledged.
      const acknowledged = new Map<string, number>();
      let writing = true;
      let failures = 0;
      const writer = async (w: number) => {
        for (let i = 0; writing; i++) {
          const key = `w${w}/${i}`;
          const answer = await call(`${server.api}/${id}/${key}`, { method: 'PUT', body: `${key} `.repeat(50) });
          if (answer.status === 200) acknowledged.set(key, Number(answer.headers.get('kvb-revision')));
          else failures++;
        }
      };
      const writers = Array.from({ length: 6 }, (_, w) => writer(w));
      await expect.poll(() => acknowledged.size, { timeout: 20_000, interval: 20 }).toBeGreaterThanOrEqual(300);
      const before = new Map(acknowledged);
      const out = join(live, 'copy.db');
      const backup = await db(['backup', '--db', file, '--out', out]);
      const duringBackup = acknowledged.size - before.size;
      // A few more writes after the backup: the server kept writing throughout.
      const after = acknowledged.size;
      await expect.poll(() => acknowledged.size, { timeout: 20_000, interval: 20 }).toBeGreaterThanOrEqual(after + 50);
      writing = false;
      await Promise.all(writers);
      expect(backup.exitCode, backup.stderr).toBe(0);
      expect(backup.stderr).toContain('integrity_check ok');
      expect(failures).toBe(0);
      expect(duringBackup, 'writes went on while the backup ran').toBeGreaterThan(0);
      expect(statSync(out).mode & 0o777).toBe(0o600);
      // A standalone file: no WAL beside it.
      expect(existsSync(`${out}-wal`)).toBe(false);

      const copy = new BetterSqlite3(out, { readonly: true });
      try {
        expect(copy.pragma('integrity_check', { simple: true })).toBe('ok');
        const revisionOf = copy.prepare('select revision from entries where bucket_id = ? and key = ?');
        const missing = [...before].filter(
          ([key, revision]) => (revisionOf.get(id, Buffer.from(key)) as { revision: number } | undefined)?.revision !== revision,
        );
        expect(missing).toEqual([]);
        expect(
          (
            copy.prepare("select count(*) as n from entries where key >= cast('fill/' as blob) and key < cast('fill0' as blob)").get() as {
              n: number;
            }
          ).n,
        ).toBe(1600);
      } finally {
        copy.close();
      }
      // And a server started on the copy serves them.
      const restored = await serve(out);
      try {
        const [key] = [...before.keys()];
        expect((await call(`${restored.api}/${id}/${key}`)).text).toBe(`${key} `.repeat(50));
      } finally {
        await restored.stop({ keepData: true });
      }
    } finally {
      await server.stop({ keepData: true });
    }
  });

  it('check and dump read a live file; restore is refused while the server holds it', async () => {
    const live = mkdtempSync(join(tmpdir(), 'kvb-live-'));
    const file = join(live, 'kvb.db');
    const server = await serve(file);
    try {
      const id = await createBucket(server.api);
      await call(`${server.api}/${id}/k`, { method: 'PUT', body: 'v' });
      const checked = await db(['check', '--db', file]);
      expect(checked.exitCode, checked.stderr).toBe(0);
      expect(checked.stderr).toMatch(/ok \(sqlite\): 1 bucket, 1 key, no problems found/);
      const dumpFile = join(live, 'live.dump');
      const dumped = await db(['dump', '--db', file, '-o', dumpFile]);
      expect(dumped.exitCode, dumped.stderr).toBe(0);
      expect(readFileSync(dumpFile, 'utf8')).toContain('"key":"k","type":"text","value":"v"');
      const restored = await db(['restore', '--db', file, dumpFile, '--force']);
      expect(restored.exitCode).toBe(1);
      expect(restored.stderr).toMatch(/in use by another process .*stop the kvb serve that holds it first/);
      // The server still serves and writes after all three.
      expect((await call(`${server.api}/${id}/k2`, { method: 'PUT', body: 'w' })).status).toBe(200);
      expect((await call(`${server.api}/${id}/k`)).text).toBe('v');
    } finally {
      await server.stop({ keepData: true });
    }
    // Once it stopped, restore takes the lock itself.
    const dumpFile = join(live, 'live.dump');
    const restored = await db(['restore', '--db', file, dumpFile, '--force']);
    expect(restored.exitCode, restored.stderr).toBe(0);
  });
});
