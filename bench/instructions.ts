/**
 * `npx tsx bench/instructions.ts --case set_text --requests 15000`: the instructions a kvb server
 * executes for a fixed number of requests of one bench case, counted by valgrind's callgrind
 * (every thread of the process, start-up and shutdown included). Unlike CPU time, a count does not
 * depend on what else the machine is doing, so two builds compare on a busy or noisy machine
 * (`KVB_BENCH_BIN=<other checkout>/bin/kvb`). It still varies by a few percent between runs of one
 * build: group commit's batch sizes follow timing. Run each build several times, interleaved, and
 * compare the difference between two request counts to leave start-up out.
 * Needs valgrind (Debian: valgrind); the server runs about 50 times slower under it.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import { freePort, onPath, spawnLogged, stopChild } from './processes.js';
import { KVB_BIN, kvbArgs } from './services.js';
import { CASES, type CaseName, kvbWorkloads, prepareKvb } from './workloads.js';

const { values: flags } = parseArgs({
  options: {
    case: { type: 'string', default: 'set_text' },
    requests: { type: 'string', default: '15000' },
    connections: { type: 'string', default: '20' },
    help: { type: 'boolean', default: false },
  },
});
if (flags.help) {
  console.log(`Usage: npx tsx bench/instructions.ts [--case ${Object.keys(CASES).join('|')}] [--requests N] [--connections N]`);
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
// --smc-check: V8 writes the machine code it runs; callgrind must see it change.
const server = spawnLogged(
  'valgrind',
  [
    '--tool=callgrind',
    '--smc-check=all-non-file',
    `--callgrind-out-file=${out}`,
    process.execPath,
    KVB_BIN,
    ...kvbArgs(port, join(tmp, 'kvb.db')),
  ],
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
const result = await autocannon({
  url,
  connections: Number(flags.connections),
  amount: requests,
  requests: [
    {
      setupRequest: (request) => {
        const planned = plan[next++ % plan.length]!;
        return { ...request, method: planned.method, path: planned.path, headers: planned.headers ?? {}, body: planned.body ?? '' };
      },
    },
  ],
});
await stopChild(server, 120_000);
const summary = /^summary: (\d+)/m.exec(readFileSync(out, 'utf8'));
rmSync(tmp, { recursive: true, force: true });
if (!summary || result.non2xx > 0 || result.errors > 0) {
  console.error(
    `instructions: ${result.non2xx} non-2xx answers, ${result.errors} errors; callgrind summary ${summary ? 'read' : 'missing'}`,
  );
  process.exit(1);
}
console.log(JSON.stringify({ bin: KVB_BIN, case: name, requests: result.requests.total, instructions: Number(summary[1]) }));
