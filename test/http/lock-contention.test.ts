import { existsSync, mkdtempSync, readFileSync, rmSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_BACKEND } from '../helpers/backend.js';
import { tempConfigHome } from '../helpers/cli.js';
import { createBucket } from '../helpers/http.js';
import { type AppServer, startAppServer } from '../helpers/app-server.js';
import { KVB_BIN } from '../helpers/server.js';

/*
 * `kvb lock NAME -- CMD`: 8 processes contend for one lock. Each command proves it is alone by
 * creating a marker file exclusively (O_EXCL) and removing it before it exits: a second holder
 * at any moment fails that create and exits 99. On PostgreSQL the contenders are split over two
 * server instances sharing the store. No test step waits on a clock: every wait is for an event
 * (a file appearing, a process exiting), bounded only by the test timeout.
 */

let a: AppServer;
let b: AppServer;
let bucket: string;
const SECRET = 'lock-secret';

beforeAll(async () => {
  a = await startAppServer();
  b = TEST_BACKEND === 'postgres' ? await startAppServer({ db: a.db }) : a;
  bucket = await createBucket(a.api, { secret_key: SECRET });
});
afterAll(async () => {
  if (b !== a) await b?.stop();
  await a?.stop();
});

/** The critical section: exclusive marker, a short stay, marker removed, exit 0. With HANG_FIRST, the first holder stays until killed. */
const CRITICAL = `
const fs = require('node:fs');
const dir = process.env.LOCK_DIR;
try { fs.writeFileSync(dir + '/holder', String(process.pid), { flag: 'wx' }); }
catch { fs.appendFileSync(dir + '/violations', process.pid + '\\n'); process.exit(99); }
fs.appendFileSync(dir + '/entries', process.pid + '\\n');
let first = false;
if (process.env.HANG_FIRST) { try { fs.writeFileSync(dir + '/first', '', { flag: 'wx' }); first = true; } catch {} }
if (first) {
  fs.writeFileSync(dir + '/hung.tmp', JSON.stringify({ kvb: process.ppid, child: process.pid }));
  fs.renameSync(dir + '/hung.tmp', dir + '/hung');
  setInterval(() => {}, 1000);
} else {
  // A short stay: its length only widens the window in which a second holder would be caught.
  setTimeout(() => { fs.unlinkSync(dir + '/holder'); process.exit(0); }, 50);
}`;

function contender(server: AppServer, dir: string, ttl: number, env: Record<string, string> = {}) {
  return execa('node', [KVB_BIN, 'lock', `lock/${dir.slice(-6)}`, '--ttl', String(ttl), '--', process.execPath, '-e', CRITICAL], {
    env: { KVB_URL: server.url, KVB_BUCKET: bucket, KVB_TOKEN: SECRET, XDG_CONFIG_HOME: tempConfigHome(), LOCK_DIR: dir, ...env },
    reject: false,
    timeout: 150_000,
  });
}

/** Resolves once `path` exists (polled: a file written by another process has no event to wait on here). */
async function fileAppears(path: string): Promise<void> {
  while (!existsSync(path)) await new Promise((resolve) => setTimeout(resolve, 20));
}

const lines = (path: string) => (existsSync(path) ? readFileSync(path, 'utf8').split('\n').filter(Boolean) : []);

describe('kvb lock: one holder at a time', () => {
  it('8 contending processes each run their command once, never two at a time, and exit with its code', { timeout: 180_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kvb-lock-'));
    try {
      const runs = await Promise.all(Array.from({ length: 8 }, (_, i) => contender(i % 2 === 0 ? a : b, dir, 10)));
      for (const run of runs) expect({ exitCode: run.exitCode, stderr: run.stderr }).toMatchObject({ exitCode: 0 });
      expect(lines(join(dir, 'violations'))).toEqual([]);
      expect(lines(join(dir, 'entries'))).toHaveLength(8);
      expect(existsSync(join(dir, 'holder'))).toBe(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a holder killed with SIGKILL keeps the lock until its TTL runs out, then the others get it, one at a time', {
    timeout: 180_000,
  }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kvb-lock-'));
    try {
      // The shortest TTL that still leaves a living holder two renewals (every third of it) before it lapses.
      const runs = Array.from({ length: 8 }, (_, i) => contender(i % 2 === 0 ? a : b, dir, 2, { HANG_FIRST: '1' }));
      await fileAppears(join(dir, 'hung'));
      const hung = JSON.parse(readFileSync(join(dir, 'hung'), 'utf8')) as { kvb: number; child: number };
      // While it still holds the lock nobody else can be inside, so its marker may go first;
      // then the holder (kvb and its command) dies without releasing anything.
      unlinkSync(join(dir, 'holder'));
      process.kill(hung.kvb, 'SIGKILL');
      process.kill(hung.child, 'SIGKILL');
      const results = await Promise.all(runs);
      const killed = results.filter((r) => r.signal === 'SIGKILL');
      expect(killed).toHaveLength(1);
      for (const run of results.filter((r) => r.signal !== 'SIGKILL'))
        expect({ exitCode: run.exitCode, stderr: run.stderr }).toMatchObject({ exitCode: 0 });
      expect(lines(join(dir, 'violations'))).toEqual([]);
      expect(lines(join(dir, 'entries'))).toHaveLength(8);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("the command's exit code is kvb's, and the lock is free again afterwards", async () => {
    const env = { KVB_URL: a.url, KVB_BUCKET: bucket, KVB_TOKEN: SECRET, XDG_CONFIG_HOME: tempConfigHome() };
    const failed = await execa('node', [KVB_BIN, 'lock', 'lock/code', '--', 'sh', '-c', 'test "$KVB_LOCK" = lock/code && exit 7'], {
      env,
      reject: false,
    });
    expect(failed.exitCode).toBe(7);
    const get = await execa('node', [KVB_BIN, 'get', 'lock/code'], { env, reject: false });
    expect(get.exitCode).toBe(2);
    const missing = await execa('node', [KVB_BIN, 'lock', 'lock/code', '--', 'no-such-command-kvb'], { env, reject: false });
    expect(missing.exitCode).toBe(1);
    expect(missing.stderr).toContain('ENOENT');
    expect((await execa('node', [KVB_BIN, 'get', 'lock/code'], { env, reject: false })).exitCode).toBe(2);
  });

  it('--timeout gives up waiting for a lock another holder keeps: exit 4 naming it, the command never runs', async () => {
    const env = { KVB_URL: a.url, KVB_BUCKET: bucket, KVB_TOKEN: SECRET, XDG_CONFIG_HOME: tempConfigHome() };
    // Another holder, for an hour.
    const held = await execa('node', [KVB_BIN, 'set', 'lock/busy', 'someone-else', '--ttl', '3600'], { env, reject: false });
    expect(held.exitCode, held.stderr).toBe(0);
    const dir = mkdtempSync(join(tmpdir(), 'kvb-lock-timeout-'));
    const marker = join(dir, 'ran');
    const [after, before] = await Promise.all([
      execa('node', [KVB_BIN, 'lock', '--timeout', '1', 'lock/busy', '--', 'touch', marker], { env, reject: false, timeout: 60_000 }),
      execa('node', [KVB_BIN, '--timeout', '1', 'lock', 'lock/busy', '--', 'touch', marker], { env, reject: false, timeout: 60_000 }),
    ]);
    for (const gaveUp of [after, before]) {
      expect(gaveUp.exitCode, gaveUp.stderr).toBe(4);
      expect(gaveUp.stderr).toBe(
        'kvb: gave up waiting for lock "lock/busy" after 1 s (--timeout): another holder still has it; nothing was run',
      );
    }
    expect(existsSync(marker)).toBe(false);
    expect((await execa('node', [KVB_BIN, 'get', 'lock/busy'], { env, reject: false })).stdout).toBe('someone-else');
    // A free lock within the timeout: taken and run as usual.
    const free = await execa('node', [KVB_BIN, 'lock', '--timeout', '30', 'lock/free', '--', 'touch', marker], {
      env,
      reject: false,
      timeout: 60_000,
    });
    expect(free.exitCode, free.stderr).toBe(0);
    expect(existsSync(marker)).toBe(true);
    rmSync(dir, { recursive: true, force: true });
  });
});
