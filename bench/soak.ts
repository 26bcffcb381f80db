/**
 * `npm run soak`: minutes of mixed load (get, set, counter, list, transaction) against `kvb serve`,
 * sampling the server's RSS. Fails (exit 1) on any error or non-2xx answer, or when RSS grows by
 * more than `--max-growth` percent between the end of the warm-up and the end of the run.
 */
import { execFileSync, fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { LoadJob, LoadResult, PlannedRequest } from './load-generator.js';
import { memoryBytes } from './processes.js';
import { startKvb } from './services.js';
import { kvbWorkloads, prepareKvb } from './workloads.js';

const ROOT = new URL('..', import.meta.url).pathname;
const { values: flags } = parseArgs({
  options: {
    seconds: { type: 'string', default: '120' },
    warmup: { type: 'string' },
    'sample-every': { type: 'string', default: '5' },
    'max-growth': { type: 'string', default: '20' },
    connections: { type: 'string', default: '50' },
    db: { type: 'string' },
    'no-build': { type: 'boolean', default: false },
  },
});
const seconds = Number(flags.seconds);
const warmup = Number(flags.warmup ?? Math.min(30, Math.round(seconds / 4)));
const everyMs = Number(flags['sample-every']) * 1000;
const mb = (bytes: number) => (bytes / 2 ** 20).toFixed(1);

if (!flags['no-build']) {
  execFileSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', join(ROOT, 'tsconfig.build.json')], {
    stdio: 'inherit',
  });
}
const tmp = mkdtempSync(join(tmpdir(), 'kvb-soak-'));
const kvb = await startKvb('kvb', tmp, flags.db ?? join(tmp, 'soak.db'));
const generator = fork(join(ROOT, 'bench/load-generator.ts'), [], { execArgv: ['--import', 'tsx'], stdio: 'inherit' });
let exitCode = 1;
try {
  const w = kvbWorkloads(await prepareKvb(kvb.url));
  // Ten requests in every turn: 4 reads, 2 sets, 2 counters, a listing and a transaction.
  const mix: PlannedRequest[] = [];
  for (let i = 0; i < 1000; i++) {
    const at = <T>(plan: T[]) => plan[i % plan.length]!;
    mix.push(at(w.get_hit.plan), at(w.auth_get.plan), at(w.set_text.plan), at(w.get_hit.plan), at(w.counter.plan));
    mix.push(at(w.set_json.plan), at(w.get_miss.plan), at(w.counter.plan), at(w.list_100.plan), at(w.txn_10.plan));
  }
  // get_miss answers 404 by design: swap it for a hit so that every non-2xx is a failure.
  for (let i = 6; i < mix.length; i += 10) mix[i] = w.get_hit.plan[Math.floor(i / 10) % w.get_hit.plan.length]!;

  const pid = kvb.children[0]!.pid;
  const samples: Array<{ at: number; rss: number }> = [];
  const started = Date.now();
  const timer = setInterval(() => samples.push({ at: (Date.now() - started) / 1000, rss: memoryBytes(pid).rss }), everyMs);
  const job: LoadJob = {
    id: 1,
    urls: [kvb.url],
    plan: mix,
    connections: Number(flags.connections),
    pipelining: 1,
    seconds,
    warmupSeconds: 0,
  };
  process.stderr.write(`soak: ${seconds} s of mixed load, RSS sampled every ${everyMs / 1000} s, warm-up ${warmup} s\n`);
  const result = await new Promise<LoadResult>((resolve, reject) => {
    generator.once('message', resolve);
    generator.once('exit', (code) => reject(new Error(`the load generator exited (${code})`)));
    generator.send(job);
  });
  clearInterval(timer);
  samples.push({ at: (Date.now() - started) / 1000, rss: memoryBytes(pid).rss });

  const afterWarmup = samples.filter((s) => s.at >= warmup);
  const startRss = afterWarmup[0]?.rss ?? samples[0]!.rss;
  const endRss = samples.at(-1)!.rss;
  const peakRss = Math.max(...afterWarmup.map((s) => s.rss));
  const growth = ((endRss - startRss) / startRss) * 100;
  const failures = result.errors + result.timeouts + result.non2xx;
  console.log(`RSS samples (MB): ${samples.map((s) => `${Math.round(s.at)}s=${mb(s.rss)}`).join(' ')}`);
  console.log(
    `RSS after warm-up ${mb(startRss)} MB, at the end ${mb(endRss)} MB (${growth >= 0 ? '+' : ''}${growth.toFixed(1)}%), peak ${mb(peakRss)} MB`,
  );
  console.log(
    `requests ${result.total} (${Math.round(result.requestsPerSecond)}/s), p50 ${result.p50Ms} ms, p99 ${result.p99Ms} ms, ` +
      `errors ${result.errors}, timeouts ${result.timeouts}, non-2xx ${result.non2xx} ${JSON.stringify(result.statusCodes)}`,
  );
  const maxGrowth = Number(flags['max-growth']);
  if (failures > 0) console.log('FAIL: errors or non-2xx answers');
  else if (growth > maxGrowth) console.log(`FAIL: RSS grew more than ${maxGrowth}% after warm-up`);
  else {
    console.log('PASS');
    exitCode = 0;
  }
} finally {
  generator.kill();
  await kvb.stop();
  rmSync(tmp, { recursive: true, force: true });
}
process.exit(exitCode);
