/**
 * `npm run bench:history`: what history costs a SET, and what a change costs in storage.
 * Two kvb servers on SQLite in one run, measured in alternating rounds: "on" as shipped, and "off"
 * with the history index (changes_key on bucket, key, revision) dropped, i.e. the change log as
 * the watch feed alone needed it. Reported: server CPU µs per SET (user + system, /proc) for each
 * and their ratio; and the bytes of the change log (table and indexes, from SQLite's dbstat) per
 * change row, on and off. KVB_BENCH_AA=1 keeps the index on both servers (an A/A run: the
 * ratio it reports is the noise of the method).
 */
import BetterSqlite3 from 'better-sqlite3';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { forkLoadDriver } from './load-driver.js';
import { serviceCpuMs } from './processes.js';
import { type HttpService, startKvb } from './services.js';
import { createBucket, kvbWorkloads } from './workloads.js';

const { values: flags } = parseArgs({
  options: {
    duration: { type: 'string', default: '3' },
    repeats: { type: 'string', default: '3' },
    connections: { type: 'string', default: '50' },
    out: { type: 'string', default: 'bench/results/history-cost.json' },
  },
});
const seconds = Number(flags.duration);
const repeats = Number(flags.repeats);

/** The change log's bytes (table and its indexes) and rows. */
function changeLogBytes(file: string): { bytes: number; rows: number } {
  const db = new BetterSqlite3(file, { readonly: true });
  try {
    const names = (db.prepare("select name from sqlite_master where tbl_name = 'changes'").all() as Array<{ name: string }>).map(
      (r) => r.name,
    );
    const placeholders = names.map(() => '?').join(',');
    const bytes = (db.prepare(`select sum(pgsize) as b from dbstat where name in (${placeholders})`).get(...names) as { b: number }).b;
    const rows = (db.prepare('select count(*) as n from changes').get() as { n: number }).n;
    return { bytes, rows };
  } finally {
    db.close();
  }
}

async function main(): Promise<void> {
  const tmp = mkdtempSync(join(tmpdir(), 'kvb-bench-history-'));
  const files = { on: join(tmp, 'on.db'), off: join(tmp, 'off.db') };
  // "off": migrated once, then the history index dropped before the measured server starts.
  const first = await startKvb('off-migrate', tmp, files.off);
  await first.stop();
  const raw = new BetterSqlite3(files.off);
  if (!process.env.KVB_BENCH_AA) raw.exec('drop index changes_key');
  raw.close();
  const servers: Record<'on' | 'off', HttpService> = {
    on: await startKvb('on', tmp, files.on),
    off: await startKvb('off', tmp, files.off),
  };
  const driver = forkLoadDriver(Number(flags.connections), 1);
  const cpu: Record<'on' | 'off', { ms: number; requests: number }> = { on: { ms: 0, requests: 0 }, off: { ms: 0, requests: 0 } };
  try {
    const workloads = {
      on: kvbWorkloads({ bucket: await createBucket(servers.on.url), authBucket: '', token: '', spread: [] }).set_text,
      off: kvbWorkloads({ bucket: await createBucket(servers.off.url), authBucket: '', token: '', spread: [] }).set_text,
    };
    for (let round = 0; round < repeats; round++) {
      // Alternating order, so neither side always runs on a warmer machine.
      for (const mode of round % 2 === 0 ? (['on', 'off'] as const) : (['off', 'on'] as const)) {
        await driver.load(servers[mode].url, workloads[mode], 1);
        const before = serviceCpuMs(servers[mode]);
        const result = await driver.load(servers[mode].url, workloads[mode], seconds);
        cpu[mode].ms += serviceCpuMs(servers[mode]) - before;
        cpu[mode].requests += result.total;
        console.log(`round ${round + 1} ${mode}: ${Math.round(result.requestsPerSecond)} SET/s, p99 ${result.p99Ms} ms`);
      }
    }
  } finally {
    driver.stop();
    await servers.on.stop();
    await servers.off.stop();
  }
  const perSet = (mode: 'on' | 'off') => (cpu[mode].ms * 1000) / Math.max(1, cpu[mode].requests);
  const storage = { on: changeLogBytes(files.on), off: changeLogBytes(files.off) };
  const report = {
    setCpuUsOn: Number(perSet('on').toFixed(1)),
    setCpuUsOff: Number(perSet('off').toFixed(1)),
    ratio: Number((perSet('on') / perSet('off')).toFixed(3)),
    bytesPerChangeOn: Math.round(storage.on.bytes / Math.max(1, storage.on.rows)),
    bytesPerChangeOff: Math.round(storage.off.bytes / Math.max(1, storage.off.rows)),
    valueBytes: 100,
    keyBytes: 'k0'.length + 2,
    rows: { on: storage.on.rows, off: storage.off.rows },
  };
  console.log(`server CPU per SET: history on ${report.setCpuUsOn} µs, off ${report.setCpuUsOff} µs (ratio ${report.ratio})`);
  console.log(`change log per change (100-byte values): on ${report.bytesPerChangeOn} B, off ${report.bytesPerChangeOff} B`);
  mkdirSync(join(tmp, '..'), { recursive: true });
  writeFileSync(flags.out!, `${JSON.stringify(report, null, 2)}\n`);
  rmSync(tmp, { recursive: true, force: true });
}

await main();
