import { existsSync, mkdtempSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { call, createBucket } from '../helpers/http.js';
import { startServer } from '../helpers/server.js';

/**
 * On SQLite, WAL checkpoints run on a worker thread beside the server, shortly after
 * commits; the server's own auto-checkpoint waits until the WAL holds 10,000 pages (about 40 MiB).
 * About 4 MiB of writes stay far below that, so pages that reach `kvb.db` while the server runs
 * were copied there by the worker. A clean stop still checkpoints and truncates the WAL.
 */
describe('SQLite WAL checkpoints beside the server', () => {
  it('copies committed pages into the database file while serving, and leaves no WAL after a clean stop', { timeout: 60_000 }, async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'kvb-wal-'));
    const file = join(dataDir, 'kvb.db');
    const server = await startServer({ dataDir });
    let bucket = '';
    const value = 'x'.repeat(10_000);
    try {
      bucket = await createBucket(server.api, { secret_key: 'admin' });
      const before = statSync(file).size;
      for (let i = 0; i < 400; i += 20) {
        const answers = await Promise.all(
          Array.from({ length: 20 }, (_, j) =>
            call(`${server.api}/${bucket}/k${i + j}`, { method: 'PUT', body: value, headers: { authorization: 'Bearer admin' } }),
          ),
        );
        for (const answer of answers) expect(answer.status, answer.text).toBe(200);
      }
      // 400 values of 10 kB: 4 MB in the WAL, about 1,000 pages; the worker copies them within 50 ms of the last commit.
      await expect.poll(() => statSync(file).size, { timeout: 10_000, interval: 50 }).toBeGreaterThan(before + 3_000_000);
      expect(statSync(`${file}-wal`).size).toBeGreaterThan(0);
      const read = await call(`${server.api}/${bucket}/k399`, { headers: { authorization: 'Bearer admin' } });
      expect(read.text).toBe(value);
    } finally {
      expect(await server.stop({ keepData: true })).toBe(0);
    }
    expect(existsSync(`${file}-wal`) ? statSync(`${file}-wal`).size : 0).toBe(0);
    const again = await startServer({ dataDir });
    try {
      // Every acknowledged write is there after the restart.
      for (const key of ['k0', 'k199', 'k399'])
        expect((await call(`${again.api}/${bucket}/${key}`, { headers: { authorization: 'Bearer admin' } })).text).toBe(value);
    } finally {
      await again.stop();
    }
  });
});
