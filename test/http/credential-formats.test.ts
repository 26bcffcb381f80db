import BetterSqlite3 from 'better-sqlite3';
import { execa } from 'execa';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { hashCredentialLegacy } from '../../src/auth/credential-hash.js';
import { TEST_BACKEND, withAdminClient } from '../helpers/backend.js';
import { call, createBucket, json } from '../helpers/http.js';
import { type AppServer, startAppServer } from '../helpers/app-server.js';
import { KVB_BIN } from '../helpers/server.js';

/**
 * A bucket's keys share one salt (one scrypt run per presented credential).
 * Buckets stored in the legacy format (a salt per key) keep working, move over key by key as
 * their keys are set, and `kvb db dump` / `restore` carry either format.
 */

const HASH_COLUMNS = ['secret_key_hash', 'read_key_hash', 'write_key_hash'] as const;
type Hashes = Record<(typeof HASH_COLUMNS)[number], string | null>;

const db = (args: string[]) => execa('node', [KVB_BIN, 'db', ...args], { reject: false, env: { KVB_DB: '' } });
const bearer = (credential: string) => ({ authorization: `Bearer ${credential}` });
const dirs: string[] = [];
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), 'kvb-formats-'));
  dirs.push(dir);
  return dir;
};

/** The stored hashes of a bucket, read (and, with `set`, written) straight in the server's storage while it is stopped. */
async function storedHashes(server: AppServer, bucket: string, set?: Hashes): Promise<Hashes> {
  const columns = HASH_COLUMNS.join(', ');
  if (server.backend === 'postgres') {
    const schema = new URL(server.db).searchParams.get('schema') ?? 'public';
    return withAdminClient(async (client) => {
      if (set)
        await client.query(`update "${schema}".buckets set secret_key_hash = $1, read_key_hash = $2, write_key_hash = $3 where id = $4`, [
          ...HASH_COLUMNS.map((c) => set[c]),
          bucket,
        ]);
      return (await client.query<Hashes>(`select ${columns} from "${schema}".buckets where id = $1`, [bucket])).rows[0]!;
    });
  }
  const file = new BetterSqlite3(server.db);
  try {
    if (set)
      file
        .prepare('update buckets set secret_key_hash = ?, read_key_hash = ?, write_key_hash = ? where id = ?')
        .run(...HASH_COLUMNS.map((c) => set[c]), bucket);
    return file.prepare(`select ${columns} from buckets where id = ?`).get(bucket) as Hashes;
  } finally {
    file.close();
  }
}

const saltOf = (hash: string | null) => hash?.split('$')[4];

/** What each key may do right now: the policy (admin), a read, a write. */
async function access(server: AppServer, bucket: string, keys: { admin: string; read: string; write: string }) {
  return {
    admin: (await call(`${server.api}/${bucket}`, { headers: bearer(keys.admin) })).status,
    read: (await call(`${server.api}/${bucket}/missing`, { headers: bearer(keys.read) })).status,
    write: (await call(`${server.api}/${bucket}/k`, { method: 'PUT', body: 'v', headers: bearer(keys.write) })).status,
  };
}

afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe(`credential hash formats (${TEST_BACKEND})`, () => {
  it('a new bucket stores its keys with one shared salt, each in its own slot', async () => {
    const server = await startAppServer();
    try {
      const bucket = await createBucket(server.api, { secret_key: 'same', read_key: 'same', write_key: 'writer' });
      expect(await access(server, bucket, { admin: 'same', read: 'same', write: 'writer' })).toEqual({ admin: 200, read: 404, write: 200 });
      await server.stop({ keepData: true });
      const hashes = await storedHashes(server, bucket);
      for (const column of HASH_COLUMNS) expect(hashes[column]).toMatch(/^scrypt-shared\$16384\$8\$1\$/);
      expect(new Set(HASH_COLUMNS.map((c) => saltOf(hashes[c]))).size).toBe(1);
      // The same key as admin and reader still stores two different hashes.
      expect(hashes.secret_key_hash).not.toBe(hashes.read_key_hash);
    } finally {
      await server.stop();
    }
  });

  it('legacy hashes keep working, move to the shared salt as keys are set, and dump/restore carries both', {
    timeout: 120_000,
  }, async () => {
    const keys = { admin: 'old-admin', read: 'old-reader', write: 'old-writer' };
    const first = await startAppServer();
    let second: AppServer | undefined;
    let restored: AppServer | undefined;
    try {
      const bucket = await createBucket(first.api, { secret_key: keys.admin, read_key: keys.read, write_key: keys.write });
      await first.stop({ keepData: true });
      // As an older kvb stored them: a salt per key.
      const legacy = {
        secret_key_hash: await hashCredentialLegacy(keys.admin),
        read_key_hash: await hashCredentialLegacy(keys.read),
        write_key_hash: await hashCredentialLegacy(keys.write),
      };
      await storedHashes(first, bucket, legacy);

      second = await startAppServer({ db: first.db });
      expect(await access(second, bucket, keys)).toEqual({ admin: 200, read: 404, write: 200 });
      expect((await call(`${second.api}/${bucket}/k`, { headers: bearer('a-guess') })).status).toBe(401);
      // Setting the read key: it moves to the shared format; the others stay as they were.
      expect(
        (await call(`${second.api}/${bucket}`, { method: 'PATCH', ...json({ read_key: 'new-reader' }, bearer(keys.admin)) })).status,
      ).toBeLessThan(300);
      keys.read = 'new-reader';
      expect(await access(second, bucket, keys)).toEqual({ admin: 200, read: 404, write: 200 });
      expect((await call(`${second.api}/${bucket}/missing`, { headers: bearer('old-reader') })).status).toBe(401);
      await second.stop({ keepData: true });
      const mixed = await storedHashes(first, bucket);
      expect(mixed.secret_key_hash).toBe(legacy.secret_key_hash);
      expect(mixed.write_key_hash).toBe(legacy.write_key_hash);
      expect(mixed.read_key_hash).toMatch(/^scrypt-shared\$/);

      // A dump carries the mixed bucket as stored; a restore serves it with every key working.
      const dir = tempDir();
      const dumped = await db(['dump', '--db', first.db, '-o', join(dir, 'all.dump')]);
      expect(dumped.exitCode, dumped.stderr).toBe(0);
      const line = readFileSync(join(dir, 'all.dump'), 'utf8')
        .split('\n')
        .map((l) => (l ? JSON.parse(l) : {}))
        .find((l) => l.id === bucket);
      expect(line).toMatchObject(mixed);
      const target = join(dir, 'restored.db');
      // An empty kvb database to restore into (restore does not create one).
      await (await startAppServer({ db: target })).stop();
      const restoring = await db(['restore', join(dir, 'all.dump'), '--db', target]);
      expect(restoring.exitCode, restoring.stderr).toBe(0);
      restored = await startAppServer({ db: target });
      expect(await access(restored, bucket, keys)).toEqual({ admin: 200, read: 404, write: 200 });
      // The next key set joins the shared salt the read key already has.
      expect(
        (await call(`${restored.api}/${bucket}`, { method: 'PATCH', ...json({ secret_key: 'new-admin' }, bearer(keys.admin)) })).status,
      ).toBeLessThan(300);
      keys.admin = 'new-admin';
      expect(await access(restored, bucket, keys)).toEqual({ admin: 200, read: 404, write: 200 });
      await restored.stop({ keepData: true });
      const moved = await storedHashes(restored, bucket);
      expect(moved.secret_key_hash).toMatch(/^scrypt-shared\$/);
      expect(saltOf(moved.secret_key_hash)).toBe(saltOf(mixed.read_key_hash));
      expect(moved.write_key_hash).toBe(legacy.write_key_hash);
    } finally {
      await restored?.stop();
      await second?.stop();
      await first.stop();
    }
  });
});
