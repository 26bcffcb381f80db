import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { type RunningServer, startServer } from '../helpers/server.js';

/**
 * Durability: writes the server acknowledged survive a `kill -9`, transactions are
 * all-or-nothing after the crash, and the database opens again without repair. In both
 * durabilities: `full` fsyncs on the writer thread, answered only after the sync.
 */
describe.each(['normal', 'full'] as const)('crash safety (kill -9 under write load, --durability %s)', (durability) => {
  const args = ['--durability', durability];
  const dataDir = mkdtempSync(join(tmpdir(), 'kvb-crash-'));
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  let server: RunningServer | undefined;
  afterAll(async () => {
    await server?.stop({ keepData: true });
  });

  it('keeps every acknowledged write across three crashes', { timeout: 90_000 }, async () => {
    server = await startServer({ dataDir, args });
    const bucket = await (await fetch(`${server.api}/`, { method: 'POST', body: new URLSearchParams({ email: 'crash@test' }) })).text();
    const ackedSets = new Map<string, string>();
    const ackedTxns: number[] = [];
    const attemptedTxns: number[] = [];
    let ackedIncrements = 0;
    let attemptedIncrements = 0;
    let sequence = 0;

    for (let round = 0; round < 3; round++) {
      const current = server;
      const base = `${current.api}/${bucket}`;
      let running = true;
      const worker = async (id: number) => {
        while (running) {
          const n = sequence++;
          try {
            if (n % 3 === 0) {
              const key = `set-${n}`;
              const value = `value-${n}-${id}`;
              const res = await fetch(`${base}/${key}?ttl=0`, { method: 'POST', body: value, headers: { 'content-type': 'text/plain' } });
              if (res.status === 200) ackedSets.set(key, value);
            } else if (n % 3 === 1) {
              attemptedIncrements++;
              const res = await fetch(`${base}/counter?ttl=0`, { method: 'PATCH', body: '+1' });
              if (res.status === 200) ackedIncrements++;
            } else {
              attemptedTxns.push(n);
              const txn = Array.from({ length: 5 }, (_, i) => ({ set: `txn-${n}-${i}`, value: n, ttl: 0 }));
              const res = await fetch(base, {
                method: 'POST',
                body: JSON.stringify({ txn }),
                headers: { 'content-type': 'application/json' },
              });
              if (res.status === 204) ackedTxns.push(n);
            }
          } catch {
            return; // the server died mid-request: that write was never acknowledged
          }
        }
      };
      const workers = Array.from({ length: 16 }, (_, i) => worker(i));
      // Killed once this round has had writes acknowledged, however slowly the machine runs.
      const ackedBefore = ackedSets.size + ackedTxns.length + ackedIncrements;
      await expect
        .poll(() => ackedSets.size + ackedTxns.length + ackedIncrements - ackedBefore, { timeout: 20_000, interval: 20 })
        .toBeGreaterThanOrEqual(100);
      await current.stop({ keepData: true, signal: 'SIGKILL' });
      running = false;
      await Promise.all(workers);
      server = await startServer({ dataDir, args });
      expect((await fetch(`${server.url}/ready`)).status).toBe(200);
    }

    const base = `${server.api}/${bucket}`;
    expect(ackedSets.size).toBeGreaterThan(50);
    for (const [key, value] of ackedSets) {
      const res = await fetch(`${base}/${key}`);
      expect(res.status, key).toBe(200);
      expect(await res.text()).toBe(value);
    }
    const counter = Number(await (await fetch(`${base}/counter`)).text());
    expect(counter).toBeGreaterThanOrEqual(ackedIncrements);
    expect(counter).toBeLessThanOrEqual(attemptedIncrements);
    const keys = new Set((await (await fetch(`${base}/?format=json&prefix=txn-&limit=1000000`)).json()) as string[]);
    for (const n of ackedTxns) {
      for (let i = 0; i < 5; i++) expect(keys.has(`txn-${n}-${i}`), `acknowledged txn ${n}`).toBe(true);
    }
    for (const n of attemptedTxns) {
      const present = [0, 1, 2, 3, 4].filter((i) => keys.has(`txn-${n}-${i}`)).length;
      expect([0, 5], `txn ${n} is all or nothing`).toContain(present);
    }

    // After three crashes the file passes SQLite's own full check, with no repair step in between.
    await server.stop({ keepData: true });
    server = undefined;
    const db = new BetterSqlite3(join(dataDir, 'kvb.db'), { readonly: true });
    try {
      expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
    } finally {
      db.close();
    }
  });
});
