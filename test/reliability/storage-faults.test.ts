import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isClientAbort, storageFullReason } from '../../src/store/storage-errors.js';
import { call, createBucket, expectError } from '../helpers/http.js';
import { KVB_BIN, type RunningServer, startServer } from '../helpers/server.js';

/**
 * A real full disk: a 2 MiB tmpfs holds the SQLite file. Mounting needs root (CI runs as root);
 * elsewhere the test says why it is skipped. SQLite's `max_page_count` would also give SQLITE_FULL,
 * but only for the main file, not for the WAL or the final checkpoint, which is where it bites.
 */
function mountSmallDisk(): { dir: string; unmount: () => void } | string {
  const dir = mkdtempSync(join(tmpdir(), 'kvb-full-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=2m', 'tmpfs', dir], { stdio: 'pipe' });
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    return `cannot mount a tmpfs here (${String((err as { stderr?: Buffer }).stderr ?? err).trim()})`;
  }
  return {
    dir,
    unmount: () => {
      execFileSync('umount', ['-l', dir], { stdio: 'pipe' });
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

describe('storage faults answer what they are', () => {
  it('a full disk, a read-only server and a client abort are told apart from other errors', () => {
    expect(storageFullReason({ code: 'SQLITE_FULL' })).toMatch(/full/);
    expect(storageFullReason({ code: '53100' })).toMatch(/full/);
    expect(storageFullReason({ code: 'SQLITE_READONLY_DIRECTORY' })).toMatch(/read-only/);
    expect(storageFullReason({ code: '25006' })).toMatch(/read-only/);
    expect(storageFullReason({ code: 'SQLITE_BUSY' })).toBeUndefined();
    expect(isClientAbort(Object.assign(new Error('aborted'), { code: 'ECONNRESET' }))).toBe(true);
    expect(isClientAbort(Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }))).toBe(false);
  });
});

const disk = mountSmallDisk();
const skipReason = typeof disk === 'string' ? disk : undefined;

describe.skipIf(skipReason !== undefined)(
  `11. a full disk (SQLite on a 2 MiB tmpfs)${skipReason ? `: SKIPPED, ${skipReason}` : ''}`,
  () => {
    let server: RunningServer;
    beforeAll(async () => {
      if (typeof disk === 'string') return;
      server = await startServer({ db: join(disk.dir, 'kvb.db') });
    });
    afterAll(() => {
      if (typeof disk !== 'string') disk.unmount();
    });

    it('answers writes 507 insufficient_storage with the reason, keeps reads working, and exits 0 on SIGTERM', {
      timeout: 60_000,
    }, async () => {
      const bucket = await createBucket(server.api);
      const value = 'v'.repeat(16 * 1024);
      let refused;
      for (let i = 0; i < 400 && !refused; i++) {
        const answer = await call(`${server.api}/${bucket}/k${i}`, { method: 'PUT', body: `${i}${value}`.slice(0, 16384) });
        if (answer.status !== 200) refused = answer;
      }
      expect(refused, 'the disk never filled').toBeDefined();
      expectError(refused!, 507, 'insufficient_storage');
      expect(refused!.headers.get('kvb-error-detail')).toMatch(/disk holding the database is full/);
      const read = await call(`${server.api}/${bucket}/k0`);
      expect(read.status).toBe(200);
      expect(read.text.startsWith('0')).toBe(true);
      expect((await call(`${server.url}/health`)).status).toBe(200);
      expect(server.logs()).not.toMatch(/unexpected error/);
      expect(await server.stop()).toBe(0);
    });

    it('a database on a read-only file system is refused at start with that reason, not "disk I/O error"', async () => {
      if (typeof disk === 'string') return;
      execFileSync('mount', ['-o', 'remount,ro', disk.dir], { stdio: 'pipe' });
      const result = await execa('node', [KVB_BIN, 'serve', '--port', '0', '--db', join(disk.dir, 'kvb.db')], {
        reject: false,
        timeout: 20_000,
      });
      expect(result.exitCode).toBe(1);
      expect(result.stderr).toMatch(/cannot open SQLite database .*: the database file is on a read-only file system/);
      expect(result.stderr).not.toMatch(/disk I\/O error/);
    });
  },
);
