import BetterSqlite3 from 'better-sqlite3';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { Kysely, SqliteDialect } from 'kysely';
import { afterAll, describe, expect, it } from 'vitest';
import { kvbMigrations } from '../../src/store/kvb-migrations.js';
import { runMigrations } from '../../src/store/migration-runner.js';
import { VERSION } from '../../src/version.js';
import { POSTGRES_URL, dropSchema, postgresUrl, uniqueName, withAdminClient } from '../helpers/backend.js';
import { KVB_BIN, startServer } from '../helpers/server.js';

const dirs: string[] = [];
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), 'kvb-upgrade-'));
  dirs.push(dir);
  return dir;
};
const schemas: string[] = [];
afterAll(async () => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  for (const schema of schemas) await dropSchema(schema);
});

const kvbDb = (args: string[]) => execa('node', [KVB_BIN, 'db', ...args], { reject: false, env: { KVB_DB: '' } });
const serveOnce = (db: string) =>
  execa('node', [KVB_BIN, 'serve', '--port', '0', '--host', '127.0.0.1', '--db', db], { reject: false, timeout: 20_000 });
const sha256 = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');
const ALL = kvbMigrations('sqlite').map((m) => m.name);

/** A kvb database made by this kvb, then marked as upgraded by kvb 9.9.9 (a migration this kvb does not know). */
async function futureSqliteDatabase(): Promise<string> {
  const server = await startServer({ db: join(tempDir(), 'kvb.db') });
  await server.stop({ keepData: true });
  const raw = new BetterSqlite3(server.db);
  expect(raw.prepare('select distinct kvb_version from kysely_migration').all()).toEqual([{ kvb_version: VERSION }]);
  raw
    .prepare(
      "insert into kysely_migration (name, timestamp, kvb_version) values ('9999_from_the_future', '2030-01-01T00:00:00.000Z', '9.9.9')",
    )
    .run();
  raw.close();
  return server.db;
}

describe('Upgrading: an older kvb refuses a database a newer kvb upgraded', () => {
  it('kvb serve (SQLite) exits 1 naming both versions, and changes nothing', async () => {
    const path = await futureSqliteDatabase();
    const before = sha256(path);
    const serve = await serveOnce(path);
    expect(serve.exitCode).toBe(1);
    expect(serve.stderr).toContain('upgraded by kvb 9.9.9 (schema migration 9999_from_the_future)');
    expect(serve.stderr).toContain(`this is kvb ${VERSION}`);
    expect(sha256(path)).toBe(before);
    const dry = await kvbDb(['migrate', '--db', path, '--dry-run']);
    expect(dry.exitCode).toBe(1);
    expect(dry.stderr).toContain('kvb 9.9.9');
    // The read-beside commands refuse it too, with the same exit code (the error table's, not "try again later").
    const check = await kvbDb(['check', '--db', path]);
    expect(check.stderr).toContain('kvb 9.9.9');
    expect(check.exitCode).toBe(1);
  });

  it.skipIf(!POSTGRES_URL)('kvb serve (PostgreSQL) exits 1 naming both versions', async () => {
    const schema = uniqueName('kvb_future');
    schemas.push(schema);
    const url = postgresUrl({ schema });
    const server = await startServer({ db: url });
    await server.stop({ keepData: true });
    await withAdminClient((client) =>
      client.query(`insert into "${schema}".kysely_migration (name, timestamp, kvb_version) values ('9999_from_the_future', 'x', '9.9.9')`),
    );
    const serve = await serveOnce(url);
    expect(serve.exitCode).toBe(1);
    expect(serve.stderr).toContain('upgraded by kvb 9.9.9');
    expect(serve.stderr).toContain(`this is kvb ${VERSION}`);
    expect((await kvbDb(['migrate', '--db', url, '--dry-run'])).stderr).toContain('kvb 9.9.9');
  });
});

describe('kvb db migrate', () => {
  it('--dry-run lists the pending migrations and changes nothing; migrate applies them', async () => {
    const path = join(tempDir(), 'old.db');
    const raw = new BetterSqlite3(path);
    const db = new Kysely<unknown>({ dialect: new SqliteDialect({ database: raw }) });
    await runMigrations(db, kvbMigrations('sqlite').slice(0, 2));
    await db.destroy();
    const before = sha256(path);
    const dry = await kvbDb(['migrate', '--db', path, '--dry-run']);
    expect(dry.exitCode, dry.stderr).toBe(0);
    expect(dry.stdout.split('\n')).toEqual(ALL.slice(2));
    expect(dry.stderr).toContain(`${ALL.length - 2} pending migrations`);
    expect(sha256(path)).toBe(before);
    const applied = await kvbDb(['migrate', '--db', path]);
    expect(applied.exitCode, applied.stderr).toBe(0);
    expect(applied.stderr).toContain(`applied ${ALL.length - 2} migrations: ${ALL.slice(2).join(', ')}`);
    const again = await kvbDb(['migrate', '--db', path, '--dry-run']);
    expect(again.stdout).toBe('');
    expect(again.stderr).toContain('up to date');
  });

  it.skipIf(!POSTGRES_URL)('--dry-run on a new PostgreSQL schema lists every migration', async () => {
    const schema = uniqueName('kvb_dry');
    const dry = await kvbDb(['migrate', '--db', postgresUrl({ schema }), '--dry-run']);
    expect(dry.exitCode, dry.stderr).toBe(0);
    expect(dry.stdout.split('\n')).toEqual(kvbMigrations('postgres').map((m) => m.name));
  });
});

/** A real full disk: a 56 KiB tmpfs (mounting needs root; elsewhere the test says why it is skipped). */
function mountTinyDisk(): { dir: string; grow: () => void; unmount: () => void } | string {
  const dir = mkdtempSync(join(tmpdir(), 'kvb-tiny-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=56k', 'tmpfs', dir], { stdio: 'pipe' });
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    return `cannot mount a tmpfs here (${String((err as { stderr?: Buffer }).stderr ?? err).trim()})`;
  }
  return {
    dir,
    grow: () => execFileSync('mount', ['-o', 'remount,size=8m', dir], { stdio: 'pipe' }),
    unmount: () => {
      execFileSync('umount', ['-l', dir], { stdio: 'pipe' });
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

const disk = mountTinyDisk();
const skipReason = typeof disk === 'string' ? disk : undefined;
afterAll(() => {
  if (typeof disk !== 'string') disk.unmount();
});

describe.skipIf(skipReason !== undefined)(`a first start on a full disk${skipReason ? `: SKIPPED, ${skipReason}` : ''}`, () => {
  it('says the disk is full, leaves no half-made database, and starts once there is room', { timeout: 60_000 }, async () => {
    if (typeof disk === 'string') return;
    const path = join(disk.dir, 'kvb.db');
    const serve = await serveOnce(path);
    expect(serve.exitCode).toBe(1);
    expect(serve.stderr.split('\n')[0]).toMatch(/disk.*full/i);
    expect(serve.stderr).not.toContain('no transaction is active');
    const left = readdirSync(disk.dir);
    expect(left.filter((n) => n.startsWith('kvb.db') && !(n === 'kvb.db' && statSync(path).size === 0))).toEqual([]);
    disk.grow();
    const server = await startServer({ db: path });
    expect((await fetch(`${server.url}/ready`)).status).toBe(200);
    await server.stop({ keepData: true });
    expect(existsSync(path)).toBe(true);
  });
});
