/**
 * `npx tsx bench/instructions.ts --case set_text --requests 15000`: the instructions a kvb server
 * executes for a fixed number of requests of one bench case, counted by valgrind's callgrind
 * (every thread of the process, start-up and shutdown included). Unlike CPU time, a count does not
 * depend on what else the machine is doing, so two builds compare on a busy or noisy machine
 * (`KVB_BENCH_BIN=<other checkout>/bin/kvb`). Only the measured requests are counted: the server
 * starts, the bench's keys are loaded and `--warmup` requests of the case are sent (so the request
 * path is compiled), then `callgrind_control` zeroes the counts, the requests go, and it dumps
 * them. A run still varies by a few percent: group commit's batch sizes follow timing. Run each
 * build several times, interleaved.
 * Needs valgrind (Debian: valgrind); the server runs about 50 times slower under it.
 * `--db postgres://…/db` counts a server on PostgreSQL instead of SQLite: each run gets a database
 * of its own on that server (made before, dropped after), so runs start alike. Callgrind counts
 * only kvb's own process; for PostgreSQL's side the run also prints, per measured request, the
 * transactions its database committed and rolled back (pg_stat_database: one per statement kvb
 * sends outside a transaction, one per transaction) and the CPU time of the server's processes
 * (utime + stime from /proc, every postgres process, so only on a server on this machine and
 * only meaningful while nothing else uses it).
 */
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import pg from 'pg';
import { freePort, onPath, postgresCpuMs, spawnLogged, stopChild } from './processes.js';
import { KVB_BIN, kvbArgs } from './services.js';
import { CASES, type CaseName, kvbWorkloads, prepareKvb } from './workloads.js';

const { values: flags } = parseArgs({
  options: {
    case: { type: 'string', default: 'set_text' },
    requests: { type: 'string', default: '15000' },
    warmup: { type: 'string', default: '2000' },
    connections: { type: 'string', default: '20' },
    db: { type: 'string' },
    /** Keeps the dump (for callgrind_annotate: which functions the instructions went to). */
    keep: { type: 'string' },
    help: { type: 'boolean', default: false },
  },
});
if (flags.help) {
  console.log(
    `Usage: npx tsx bench/instructions.ts [--case ${Object.keys(CASES).join('|')}] [--requests N] [--warmup N] [--connections N] [--db postgres://…] [--keep FILE]`,
  );
  process.exit(0);
}
if (!onPath('valgrind')) {
  console.error('instructions: valgrind is not installed (Debian: apt-get install valgrind)');
  process.exit(1);
}
const name = flags.case as CaseName;
if (!(name in CASES)) {
  console.error(`instructions: no case ${name}`);
  process.exit(2);
}
const requests = Number(flags.requests);

const tmp = mkdtempSync(join(tmpdir(), 'kvb-instructions-'));
const out = join(tmp, 'callgrind.out');
const log = join(tmp, 'serve.log');
const port = await freePort();
/** A fresh database on the given PostgreSQL server for this run, or a fresh SQLite file. */
const postgres = flags.db && new URL(flags.db);
const database = `kvb_instructions_${process.pid}`;
const admin = async (statement: string) => {
  const client = new pg.Client({ connectionString: flags.db });
  await client.connect();
  try {
    await client.query(statement);
  } finally {
    await client.end();
  }
};
let db = join(tmp, 'kvb.db');
if (postgres) {
  await admin(`create database ${database}`);
  postgres.pathname = `/${database}`;
  db = postgres.toString();
}
// --smc-check: V8 writes the machine code it runs; callgrind must see it change.
const server = spawnLogged(
  'valgrind',
  ['--tool=callgrind', '--smc-check=all-non-file', `--callgrind-out-file=${out}`, process.execPath, KVB_BIN, ...kvbArgs(port, db)],
  log,
);
// Waiting for the log line, not polling /health: every request is counted, so only the case's may be sent.
while (!/listening on/.test(readFileSync(log, 'utf8'))) {
  if (server.exitCode !== null) throw new Error(`kvb serve exited under valgrind:\n${readFileSync(log, 'utf8')}`);
  await new Promise((resolve) => setTimeout(resolve, 500));
}
const url = `http://127.0.0.1:${port}`;
const plan = kvbWorkloads(await prepareKvb(url))[name].plan;
let next = 0;
const send = (amount: number) =>
  autocannon({
    url,
    connections: Number(flags.connections),
    amount,
    requests: [
      {
        setupRequest: (request) => {
          const planned = plan[next++ % plan.length]!;
          return { ...request, method: planned.method, path: planned.path, headers: planned.headers ?? {}, body: planned.body ?? '' };
        },
      },
    ],
  });
/** The run's database's committed and rolled-back transactions, as PostgreSQL's statistics have them. */
const pgTransactions = async (): Promise<number> => {
  const client = new pg.Client({ connectionString: flags.db });
  await client.connect();
  try {
    // The statistics are sent at the end of each transaction (and cached per transaction): clear the cache.
    await client.query('select pg_stat_clear_snapshot()');
    const { rows } = await client.query<{ n: string }>('select xact_commit + xact_rollback as n from pg_stat_database where datname = $1', [
      database,
    ]);
    return Number(rows[0]?.n ?? 0);
  } finally {
    await client.end();
  }
};
const control = (command: '--zero' | '--dump') => execFileSync('callgrind_control', [command, String(server.pid)], { stdio: 'ignore' });
const warmup = Number(flags.warmup);
if (warmup > 0) await send(warmup);
const before = postgres ? { transactions: await pgTransactions(), cpu: postgresCpuMs() } : undefined;
control('--zero');
const result = await send(requests);
// The dump (out.1) holds what ran since the zero: the measured requests alone.
control('--dump');
const pgCpuMs = before && postgresCpuMs() - before.cpu;
// PostgreSQL flushes a backend's statistics at most every second (PGSTAT_MIN_INTERVAL) while it is busy.
if (before) await new Promise((resolve) => setTimeout(resolve, 1500));
const pgTransactionsDone = before && (await pgTransactions()) - before.transactions - 2;
await stopChild(server, 120_000);
const summary = /^summary: (\d+)/m.exec(readFileSync(`${out}.1`, 'utf8'));
if (flags.keep) copyFileSync(`${out}.1`, flags.keep);
rmSync(tmp, { recursive: true, force: true });
if (postgres) await admin(`drop database ${database}`);
if (!summary) {
  console.error('instructions: the callgrind summary is missing');
  process.exit(1);
}
const instructions = Number(summary[1]);
const total = result.requests.total;
const postgresSide = before && {
  pgTransactionsPerRequest: Number((pgTransactionsDone! / total).toFixed(3)),
  pgCpuMicrosPerRequest: Math.round((pgCpuMs! * 1000) / total),
};
const failed = result.non2xx + result.errors;
// Printed even when some requests failed (on a loaded machine, autocannon's timeouts): the count
// is still there to look at, but the run is marked and exits 1, so it is not taken for a clean one.
console.log(
  JSON.stringify({
    bin: KVB_BIN,
    case: name,
    requests: total,
    instructions,
    perRequest: Math.round(instructions / total),
    ...postgresSide,
    ...(failed > 0 && { non2xx: result.non2xx, errors: result.errors }),
  }),
);
if (failed > 0) {
  console.error(`instructions: ${result.non2xx} non-2xx answers, ${result.errors} errors: not a clean run`);
  process.exit(1);
}
