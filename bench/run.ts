/**
 * `npm run bench`: kvb against a bare Fastify server and, when installed, webdis and etcd, all
 * measured in one run on one machine. Every figure is also a ratio to the baseline of the same
 * round, because absolute numbers on a shared machine mean little. See docs/performance.md.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { LoadResult } from './load-generator.js';
import { type LoadDriver, forkLoadDriver } from './load-driver.js';
import { type PortabilityResult, measurePortability } from './portability.js';
import { type WatchDelayResult, measureWatchDelay } from './watch-delay.js';
import { type WebhookCostResult, measureWebhookCost, webhookLines, webhookTargets } from './webhook-cost.js';
import {
  type Service,
  freePort,
  postgresCpuMs,
  requestThreadCpuMs,
  sampleRss,
  serviceCpuMs,
  spawnLogged,
  stopChild,
  waitForOk,
} from './processes.js';
import { type HttpService, KVB_BIN, compileBaseline, kvbArgs, startBaseline, startEtcd, startKvb, startWebdis } from './services.js';
import {
  CASES,
  type CaseName,
  type Workload,
  baselineWorkloads,
  createBucket,
  etcdWorkloads,
  kvbWorkloads,
  loadKeysIntoSqlite,
  loadKeysOverHttp,
  prepareEtcd,
  prepareKvb,
  prepareWebdis,
  sizeWorkloads,
  webdisWorkloads,
} from './workloads.js';

const ROOT = new URL('..', import.meta.url).pathname;

/**
 * The CLI round trip (case `cli_get`): a whole `kvb get` process, reading a stored key, against
 * `node -e 0`, the floor any Node CLI starts from. A shell loop of 100 `kvb get` pays it 100 times.
 */
const CLI_ROUND_TRIP = {
  label: 'cli_get: kvb get k',
  args: (url: string, bucket: string) => [KVB_BIN, '--url', url, '--bucket', bucket, 'get', 'k0'],
};
/** Runs of each side, interleaved so both see the same machine; the medians are compared. */
const CLI_RUNS = 21;
/** Writes per watch-delay measurement (one at a time, 5–20 ms apart). */
const WATCH_WRITES = 500;

const { values: flags } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    duration: { type: 'string' },
    warmup: { type: 'string' },
    repeats: { type: 'string' },
    connections: { type: 'string', default: '50' },
    pipelining: { type: 'string', default: '1' },
    cases: { type: 'string' },
    sizes: { type: 'string' },
    backend: { type: 'string', default: process.env.KVB_BENCH_BACKEND ?? 'sqlite' },
    db: { type: 'string', default: process.env.KVB_BENCH_DB },
    pg: { type: 'string', default: process.env.KVB_BENCH_PG },
    'no-peers': { type: 'boolean', default: false },
    'no-build': { type: 'boolean', default: false },
    'no-startup': { type: 'boolean', default: false },
    durability: { type: 'string' },
    out: { type: 'string' },
    help: { type: 'boolean', default: false },
  },
});

if (flags.help) {
  console.log(`npm run bench -- [options]
  --quick               1 round of 2 s, sizes 10k and 100k (for development)
  --duration S          seconds measured per case and round (default 3)
  --warmup S            seconds of unmeasured load before each measurement (default 1)
  --repeats N           rounds; every case runs once per round (default 3)
  --connections N       autocannon connections (default 50); --pipelining N (default 1)
  --cases a,b           only these cases (${Object.keys(CASES).join(', ')}, full, health, size, portability, watch,
                        webhooks, postgres, instances, startup, cli_get); full: SET on a second kvb at the other --durability;
                        instances (--backend postgres): SET on one bucket and over 100 buckets from 2 and 3 instances
                        health: /health latency while 50 clients SET on the kvb with --durability full
                        webhooks: SET with 0, 1 and 10 webhooks on the bucket (a local receiver), and their delivery lag
  --durability D        the main kvb's --durability (default normal, kvb's own default); case full adds a kvb at the other
  --sizes N,M           stored-key counts for the size series (default 10000,1000000)
  --backend B --db URL  run kvb against another backend (postgres://...); env KVB_BENCH_BACKEND, KVB_BENCH_DB
  --pg URL              also run GET, SET (one bucket, 100 buckets), counter and txn of 10 on one kvb on this
                        PostgreSQL (compared with SQLite in the same rounds) and the watch delay across two
                        instances on it; env KVB_BENCH_PG
  --no-peers            skip webdis and etcd; --no-startup skips start-up and CLI timings
  --no-build            do not compile kvb first (env KVB_BENCH_BIN: measure that build's bin/kvb instead)
  --out FILE            JSON results (default bench/results/latest.json; quick.json with --quick)`);
  process.exit(0);
}

const settings = {
  seconds: Number(flags.duration ?? (flags.quick ? 2 : 3)),
  warmupSeconds: Number(flags.warmup ?? 1),
  repeats: Number(flags.repeats ?? (flags.quick ? 1 : 3)),
  connections: Number(flags.connections),
  pipelining: Number(flags.pipelining),
  sizes: (flags.sizes ?? (flags.quick ? '10000,100000' : '10000,1000000')).split(',').map(Number),
  backend: flags.backend === 'postgres' ? 'postgres' : 'sqlite',
  cases: flags.cases ? new Set(flags.cases.split(',')) : undefined,
};
/** The main kvb's durability (kvb's default); case full measures the other beside it. */
const durability = flags.durability === 'full' ? 'full' : 'normal';
flags.out ??= join(ROOT, `bench/results/${flags.quick ? 'quick' : 'latest'}.json`);
if (settings.backend === 'postgres' && !flags.db) {
  console.error('--backend postgres needs --db postgres://... (or KVB_BENCH_DB)');
  process.exit(2);
}
const wanted = (name: string) => !settings.cases || settings.cases.has(name);
let portability: PortabilityResult | undefined;
const watchDelays: WatchDelayResult[] = [];
let webhookCost: WebhookCostResult | undefined;

// ---------------------------------------------------------------------------------------------
// Measurement

/** One line of the results: a server doing one case, measured once per round. */
interface Row {
  target: string;
  case: CaseName | 'get' | 'post';
  service: HttpService;
  workload: Workload;
  runs: Array<
    LoadResult & {
      rssBytes: number;
      rssAnonBytes: number;
      cpuUsPerRequest: number;
      threadCpuUsPerRequest: number;
      pgCpuUsPerRequest?: number;
    }
  >;
}

let driver: LoadDriver | undefined;

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length === 0 ? Number.NaN : s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
};

type RunFigure = 'requestsPerSecond' | 'cpuUsPerRequest' | 'threadCpuUsPerRequest';

/** Median over rounds of this row's figure (req/s unless named) divided by the other row's in the same round. */
function ratio(
  row: Row | undefined,
  other: Row | undefined,
  figure: RunFigure = 'requestsPerSecond',
  otherFigure = figure,
): number | undefined {
  if (!row || !other || row.runs.length === 0 || other.runs.length === 0) return undefined;
  const n = Math.min(row.runs.length, other.runs.length);
  return median(Array.from({ length: n }, (_, i) => row.runs[i]![figure] / other.runs[i]![otherFigure]));
}

// ---------------------------------------------------------------------------------------------
// Start-up and CLI timings

async function timeStartup(command: string[], healthPath: string): Promise<number> {
  const port = await freePort();
  const start = performance.now();
  const [program, ...args] = command.map((a) => a.replace('{port}', String(port)));
  const child = spawnLogged(program!, args, join(tmp, 'startup.log'));
  await waitForOk(`http://127.0.0.1:${port}${healthPath}`, 30_000, 1);
  const ms = performance.now() - start;
  await stopChild(child);
  return ms;
}

/** Sequential GET /health latencies (ms): `count` of them, or for as long as `until` is pending. */
async function healthLatencies(url: string, count?: number, until?: Promise<unknown>): Promise<number[]> {
  let done = false;
  void until?.finally(() => (done = true));
  const result: number[] = [];
  while (until ? !done : result.length < (count ?? 0)) {
    const started = performance.now();
    const res = await fetch(`${url}/health`);
    await res.arrayBuffer();
    if (res.status !== 200) throw new Error(`/health answered ${res.status}`);
    result.push(performance.now() - started);
  }
  return result;
}

const percentileOf = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
};
const round2 = (n: number) => Math.round(n * 100) / 100;

/** /health while 50 clients write with --durability full (the `health` case). */
let healthUnderWrites: { quietP99Ms: number; p50Ms: number; p99Ms: number; maxMs: number; samples: number } | undefined;

function timeProcess([program, ...args]: string[]): number {
  const start = performance.now();
  const result = spawnSync(program!, args, { stdio: 'ignore' });
  const ms = performance.now() - start;
  if (result.status !== 0) throw new Error(`${program} ${args.join(' ')} exited ${result.status}`);
  return ms;
}

// ---------------------------------------------------------------------------------------------

const tmp = mkdtempSync(join(tmpdir(), 'kvb-bench-'));
const services: Service[] = [];
const log = (s: string) => process.stderr.write(`${s}\n`);

async function main() {
  if (!flags['no-build']) {
    log('building kvb (tsc -p tsconfig.build.json)');
    execFileSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', join(ROOT, 'tsconfig.build.json')], {
      stdio: 'inherit',
    });
  }
  const baselineScript = compileBaseline();
  const nodeBaselineScript = compileBaseline('node-baseline-server');
  driver = forkLoadDriver(settings.connections, settings.pipelining);

  const dbFor = (name: string) => (settings.backend === 'postgres' ? flags.db! : join(tmp, `${name}.db`));
  /** A kvb named `name` with one bucket of `size` keys; a large SQLite bucket is written into the file while kvb is stopped. */
  const loadedKvb = async (name: string, size: number) => {
    let service = await startKvb(name, tmp, dbFor(name));
    const bucket = await createBucket(service.url);
    if (settings.backend === 'sqlite' && size > 10_000) {
      await service.stop();
      loadKeysIntoSqlite(dbFor(name), bucket, 0, size);
      service = await startKvb(name, tmp, dbFor(name));
    } else {
      await loadKeysOverHttp(service.url, bucket, 0, size);
    }
    services.push(service);
    return { service, bucket };
  };

  log('starting servers');
  const baseline = await startBaseline(tmp, baselineScript);
  services.push(baseline);
  const nodeBaseline = await startBaseline(tmp, nodeBaselineScript, 'node:http');
  services.push(nodeBaseline);
  const kvb = await startKvb('kvb', tmp, dbFor('kvb'), ['--durability', durability]);
  services.push(kvb);
  const fixture = await prepareKvb(kvb.url);

  const rows: Row[] = [];
  const add = (target: string, name: Row['case'], service: HttpService, workload: Workload | undefined) => {
    if (workload) rows.push({ target, case: name, service, workload, runs: [] });
  };
  add('baseline', 'get', baseline, baselineWorkloads.get);
  add('baseline', 'post', baseline, baselineWorkloads.post);
  add('node:http', 'get', nodeBaseline, baselineWorkloads.get);
  add('node:http', 'post', nodeBaseline, baselineWorkloads.post);
  const kvbCases = kvbWorkloads(fixture);
  for (const name of Object.keys(CASES) as CaseName[]) if (wanted(name)) add('kvb', name, kvb, kvbCases[name]);

  const skipped: Record<string, string> = {};
  if (flags['no-peers']) {
    skipped.webdis = skipped.etcd = 'skipped (--no-peers)';
  } else {
    const webdis = await startWebdis(tmp).catch((error: Error) => {
      skipped.webdis = `failed to start: ${error.message}`;
      return undefined;
    });
    if (webdis) {
      services.push(webdis);
      await prepareWebdis(webdis.url);
      for (const name of Object.keys(webdisWorkloads) as CaseName[]) if (wanted(name)) add('webdis', name, webdis, webdisWorkloads[name]);
    } else skipped.webdis ??= 'skipped: redis-server or webdis is not installed';
    const etcd = await startEtcd(tmp).catch((error: Error) => {
      skipped.etcd = `failed to start: ${error.message}`;
      return undefined;
    });
    if (etcd) {
      services.push(etcd);
      await prepareEtcd(etcd.url);
      for (const name of Object.keys(etcdWorkloads) as CaseName[]) if (wanted(name)) add('etcd', name, etcd, etcdWorkloads[name]);
    } else skipped.etcd ??= 'skipped: etcd is not installed';
  }
  for (const [peer, why] of Object.entries(skipped)) log(`${peer}: ${why}`);

  // Case full: SET at both durabilities in the same rounds (the main kvb runs `durability`, a second kvb
  // the other); case health runs on whichever kvb syncs every commit.
  let durable: { service: HttpService; workload: Workload } | undefined;
  if (settings.backend === 'sqlite' && durability === 'full') durable = { service: kvb, workload: kvbCases.set_text };
  if (settings.backend === 'sqlite' && (wanted('full') || (wanted('health') && !durable))) {
    const other = durability === 'full' ? 'normal' : 'full';
    const second = await startKvb(`kvb-${other}`, tmp, dbFor(`kvb-${other}`), ['--durability', other]);
    services.push(second);
    const workload = kvbWorkloads(await prepareKvb(second.url)).set_text;
    if (other === 'full') durable = { service: second, workload };
    if (wanted('full')) add(`kvb durability=${other}`, 'set_text', second, workload);
  }

  // The single-key cases on PostgreSQL, in the same rounds as SQLite: its targets are ratios to SQLite.
  if (settings.backend === 'sqlite' && flags.pg && wanted('postgres')) {
    const pg = await startKvb('kvb-postgres', tmp, flags.pg);
    services.push(pg);
    const pgCases = kvbWorkloads(await prepareKvb(pg.url));
    for (const name of ['get_hit', 'set_text', 'set_spread', 'counter', 'txn_10'] as const) add('kvb postgres', name, pg, pgCases[name]);
  } else if (settings.backend === 'sqlite' && wanted('postgres')) {
    skipped['kvb on PostgreSQL'] = 'skipped: pass --pg postgres://... (or KVB_BENCH_PG) to compare it with SQLite';
  }

  // Several instances on one database: SET on one hot bucket and over 100 buckets, 2 and 3
  // instances sharing the connections (the single instance is the kvb rows set_text and set_spread).
  if (settings.backend === 'postgres' && wanted('instances')) {
    const instances = [kvb];
    for (const n of [2, 3]) {
      const more = await startKvb(`kvb-${n}`, tmp, flags.db!);
      services.push(more);
      instances.push(more);
      const group: HttpService = {
        name: `kvb x${n}`,
        url: kvb.url,
        urls: instances.map((i) => i.url),
        children: instances.flatMap((i) => i.children),
        stop: async () => {},
      };
      add(`kvb x${n}`, 'set_text', group, kvbCases.set_text);
      add(`kvb x${n}`, 'set_spread', group, kvbCases.set_spread);
    }
  }

  if (wanted('size')) {
    for (const size of settings.sizes) {
      const name = `kvb-${size}`;
      log(`loading ${size} keys`);
      const started = performance.now();
      const { service, bucket } = await loadedKvb(name, size);
      log(`  ${size} keys loaded in ${((performance.now() - started) / 1000).toFixed(1)} s`);
      const target = `kvb ${size.toLocaleString('en-US')} keys`;
      const workloads = sizeWorkloads(bucket, size);
      add(target, 'get_hit', service, workloads.get_hit);
      add(target, 'set_text', service, workloads.set_text);
      if (size >= 100_000) add(target, 'list_100', service, workloads.list_100);
    }
  }

  // Export and import rates of the largest bucket (measured once: each moves the whole bucket).
  if (wanted('portability')) {
    const size = settings.sizes.at(-1)!;
    const name = `kvb-portability-${size}`;
    log(`loading ${size} keys for export and import`);
    const { service, bucket } = await loadedKvb(name, size);
    portability = await measurePortability(service.url, bucket, size, join(tmp, 'export.ndjson'), () => createBucket(service.url));
    log(
      `  export: ${portability.exportKeysPerSecond} keys/s (${portability.exportSeconds.toFixed(1)} s, ${(portability.exportBytes / 2 ** 20).toFixed(0)} MiB); ` +
        `import: ${portability.importKeysPerSecond} keys/s (${portability.importSeconds.toFixed(1)} s)`,
    );
  }

  // Write-to-event delay of the watch feed: one instance, and across two instances on PostgreSQL.
  if (wanted('watch')) {
    const measure = async (name: string, db: string, instances: 1 | 2, where: string) => {
      const a = await startKvb(`${name}-a`, tmp, db);
      services.push(a);
      const b = instances === 2 ? await startKvb(`${name}-b`, tmp, db) : a;
      if (b !== a) services.push(b);
      const result = await measureWatchDelay(a.url, b.url, WATCH_WRITES, where);
      log(`  watch delay (${where}): p50 ${result.p50Ms} ms, p99 ${result.p99Ms} ms`);
      watchDelays.push(result);
    };
    log('measuring the watch feed delay');
    if (settings.backend === 'postgres') await measure('kvb-watch', flags.db!, 2, 'PostgreSQL, write on instance A, watch on instance B');
    else {
      await measure('kvb-watch', dbFor('kvb-watch'), 1, 'SQLite, one instance');
      if (flags.pg) await measure('kvb-watch-pg', flags.pg, 2, 'PostgreSQL, write on instance A, watch on instance B');
      else skipped['watch on PostgreSQL'] = 'skipped: pass --pg postgres://... (or KVB_BENCH_PG) to measure it across two instances';
    }
  }

  // SET with 0, 1 and 10 webhooks on the bucket, in turn on one kvb, and their delivery lag.
  if (wanted('webhooks')) {
    const hooked = await startKvb('kvb-webhooks', tmp, dbFor('kvb-webhooks'), ['--webhook-allow-private']);
    services.push(hooked);
    log('measuring SET with webhooks on the bucket');
    webhookCost = await measureWebhookCost(hooked, driver, settings, log);
  }

  const total = rows.length * settings.repeats * (settings.seconds + settings.warmupSeconds);
  log(`measuring ${rows.length} cases x ${settings.repeats} rounds (about ${Math.ceil(total / 60)} min)`);
  for (let round = 0; round < settings.repeats; round++) {
    for (const row of rows) {
      const urls = row.service.urls ?? row.service.url;
      if (settings.warmupSeconds > 0) await driver.load(urls, row.workload, settings.warmupSeconds);
      const rss = sampleRss(row.service);
      const cpuBefore = serviceCpuMs(row.service);
      const threadBefore = requestThreadCpuMs(row.service);
      // PostgreSQL's own CPU, for the rows whose kvb is on it (every postgres process of this machine).
      const onPostgres = (settings.backend === 'postgres' && row.target.startsWith('kvb')) || row.target.startsWith('kvb postgres');
      const pgBefore = onPostgres ? postgresCpuMs() : 0;
      const result = await driver.load(urls, row.workload, settings.seconds);
      const perRequest = (ms: number) => (ms * 1000) / Math.max(1, result.total);
      const cpuUsPerRequest = perRequest(serviceCpuMs(row.service) - cpuBefore);
      const threadCpuUsPerRequest = perRequest(requestThreadCpuMs(row.service) - threadBefore);
      const pgCpuUsPerRequest = onPostgres ? perRequest(postgresCpuMs() - pgBefore) : undefined;
      const memory = rss.stop();
      row.runs.push({
        ...result,
        rssBytes: memory.rss,
        rssAnonBytes: memory.anon,
        cpuUsPerRequest,
        threadCpuUsPerRequest,
        pgCpuUsPerRequest,
      });
      log(
        `  round ${round + 1} ${row.target} ${row.case}: ${Math.round(result.requestsPerSecond)} req/s, p99 ${result.p99Ms} ms, ` +
          `${Math.round(cpuUsPerRequest)} us CPU/req (request thread ${Math.round(threadCpuUsPerRequest)})` +
          `${pgCpuUsPerRequest === undefined ? '' : ` (+${Math.round(pgCpuUsPerRequest)} PostgreSQL)`}, ` +
          `RSS ${Math.round(memory.rss / 2 ** 20)} MB (anon ${Math.round(memory.anon / 2 ** 20)})` +
          (result.errors || result.timeouts ? `, ${result.errors} errors ${result.timeouts} timeouts` : ''),
      );
    }
  }

  // How long the request thread keeps a probe waiting while the disk syncs batch after batch.
  if (durable && wanted('health')) {
    log('timing /health while 50 clients write durably');
    const quiet = await healthLatencies(durable.service.url, 200);
    const during: number[] = [];
    for (let round = 0; round < settings.repeats; round++) {
      const load = driver.load(durable.service.url, durable.workload, settings.seconds);
      during.push(...(await healthLatencies(durable.service.url, undefined, load)));
    }
    healthUnderWrites = {
      quietP99Ms: round2(percentileOf(quiet, 99)),
      p50Ms: round2(percentileOf(during, 50)),
      p99Ms: round2(percentileOf(during, 99)),
      maxMs: round2(Math.max(...during)),
      samples: during.length,
    };
    log(
      `  /health during durable SETs: p50 ${healthUnderWrites.p50Ms} ms, p99 ${healthUnderWrites.p99Ms} ms (quiet p99 ${healthUnderWrites.quietP99Ms} ms)`,
    );
  }

  let startup: { kvbMs: number; baselineMs: number; ratio: number } | undefined;
  let cli: { label: string; kvbMs: number; nodeMs: number; ratio: number } | undefined;
  if (!flags['no-startup'] && wanted('startup')) {
    log('timing start-up');
    const kvbTimes: number[] = [];
    const baseTimes: number[] = [];
    for (let i = 0; i < 5; i++) {
      kvbTimes.push(await timeStartup([KVB_BIN, ...kvbArgs('{port}', join(tmp, `startup-${i}.db`))], '/health'));
      baseTimes.push(await timeStartup([process.execPath, baselineScript, '{port}'], '/health'));
    }
    startup = { kvbMs: median(kvbTimes), baselineMs: median(baseTimes), ratio: median(kvbTimes) / median(baseTimes) };
  }
  if (!flags['no-startup'] && wanted('cli_get')) {
    log('timing the CLI round trip');
    const cliTimes: number[] = [];
    const nodeTimes: number[] = [];
    // One run first, untimed: it writes the command's V8 code cache, as the first run after an install does.
    timeProcess(CLI_ROUND_TRIP.args(kvb.url, fixture.bucket));
    for (let i = 0; i < CLI_RUNS; i++) {
      cliTimes.push(timeProcess(CLI_ROUND_TRIP.args(kvb.url, fixture.bucket)));
      nodeTimes.push(timeProcess([process.execPath, '-e', '0']));
    }
    cli = { label: CLI_ROUND_TRIP.label, kvbMs: median(cliTimes), nodeMs: median(nodeTimes), ratio: median(cliTimes) / median(nodeTimes) };
  }

  report(rows, skipped, startup, cli);
}

// ---------------------------------------------------------------------------------------------
// Report

function report(
  rows: Row[],
  skipped: Record<string, string>,
  startup: { kvbMs: number; baselineMs: number; ratio: number } | undefined,
  cli: { label: string; kvbMs: number; nodeMs: number; ratio: number } | undefined,
) {
  const find = (target: string, name: string) => rows.find((r) => r.target === target && r.case === name);
  const baselineFor = (row: Row) => (row.case === 'get' || row.case === 'post' ? undefined : find('baseline', CASES[row.case].baseline));
  const kvbLike = (row: Row) => row.target.startsWith('kvb');
  const nodeHttpFor = (row: Row) =>
    kvbLike(row) ? find('node:http', row.case === 'get' || row.case === 'post' ? row.case : CASES[row.case].baseline) : undefined;

  const results = rows.map((row) => {
    const rps = row.runs.map((r) => r.requestsPerSecond);
    const med = median(rps);
    return {
      target: row.target,
      case: row.case,
      requestsPerSecond: Math.round(med),
      spreadPercent: Math.round(((Math.max(...rps) - Math.min(...rps)) / med) * 100),
      p50Ms: median(row.runs.map((r) => r.p50Ms)),
      p99Ms: median(row.runs.map((r) => r.p99Ms)),
      peakRssMB: Math.round(Math.max(...row.runs.map((r) => r.rssBytes)) / 2 ** 20),
      peakRssAnonMB: Math.round(Math.max(...row.runs.map((r) => r.rssAnonBytes)) / 2 ** 20),
      cpuUsPerRequest: Math.round(median(row.runs.map((r) => r.cpuUsPerRequest))),
      threadCpuUsPerRequest: Math.round(median(row.runs.map((r) => r.threadCpuUsPerRequest))),
      pgCpuUsPerRequest:
        row.runs[0]?.pgCpuUsPerRequest === undefined ? undefined : Math.round(median(row.runs.map((r) => r.pgCpuUsPerRequest!))),
      non2xx: row.runs.reduce((n, r) => n + r.non2xx, 0),
      errors: row.runs.reduce((n, r) => n + r.errors + r.timeouts, 0),
      vsBaseline: ratio(row, baselineFor(row)),
      vsNodeHttp: ratio(row, nodeHttpFor(row)),
      vsWebdis: kvbLike(row) ? ratio(row, find('webdis', row.case)) : undefined,
      vsEtcd: kvbLike(row) ? ratio(row, find('etcd', row.case)) : undefined,
      runs: row.runs.map((r) => ({
        requestsPerSecond: Math.round(r.requestsPerSecond),
        p50Ms: r.p50Ms,
        p99Ms: r.p99Ms,
        rssBytes: r.rssBytes,
        rssAnonBytes: r.rssAnonBytes,
        cpuUsPerRequest: Math.round(r.cpuUsPerRequest),
        threadCpuUsPerRequest: Math.round(r.threadCpuUsPerRequest),
        pgCpuUsPerRequest: r.pgCpuUsPerRequest === undefined ? undefined : Math.round(r.pgCpuUsPerRequest),
        non2xx: r.non2xx,
      })),
    };
  });

  const get = (target: string, name: string) => results.find((r) => r.target === target && r.case === name);
  /** The row name of the kvb at durability `d` (the main kvb, or the second one of case full). */
  const atDurability = (d: string) => (d === durability ? 'kvb' : `kvb durability=${d}`);
  const [small, large] = [settings.sizes[0], settings.sizes.at(-1)].map((n) => `kvb ${(n ?? 0).toLocaleString('en-US')} keys`);
  /** A goal: `min` or `max` is the bar (the "must"), `moonshot` the further one in the same direction. */
  type Target = {
    goal: string;
    value: number | undefined;
    unit: 'x' | 'ms' | 'MB' | 'req/s';
    min?: number;
    max?: number;
    moonshot?: number;
  };
  const full = atDurability('full');
  const targets: Target[] = [
    // The request path's table: what a request costs against a bare node:http handler and the peers,
    // same run, the "must" column the bar and the moonshot beside it.
    { goal: 'GET hit vs webdis GET', value: get('kvb', 'get_hit')?.vsWebdis, unit: 'x', min: 0.9, moonshot: 1.1 },
    { goal: 'SET vs webdis SET', value: get('kvb', 'set_text')?.vsWebdis, unit: 'x', min: 0.7, moonshot: 1.0 },
    { goal: 'counter vs webdis INCR', value: get('kvb', 'counter')?.vsWebdis, unit: 'x', min: 0.7, moonshot: 1.0 },
    {
      goal: 'GET hit server CPU/req vs bare node:http GET',
      value: ratio(find('kvb', 'get_hit'), find('node:http', 'get'), 'cpuUsPerRequest'),
      unit: 'x',
      max: 1.5,
      moonshot: 1.2,
    },
    {
      goal: "SET request-thread CPU/req vs GET hit's",
      value: ratio(find('kvb', 'set_text'), find('kvb', 'get_hit'), 'threadCpuUsPerRequest'),
      unit: 'x',
      max: 1.3,
      moonshot: 1.1,
    },
    { goal: 'txn of 10 vs bare Fastify POST', value: get('kvb', 'txn_10')?.vsBaseline, unit: 'x', min: 0.4, moonshot: 0.6 },
    { goal: 'SET durability=full vs etcd put', value: get(full, 'set_text')?.vsEtcd, unit: 'x', min: 2, moonshot: 2.5 },
    {
      goal: 'SET durability=full vs durability=normal',
      value: ratio(find(full, 'set_text'), find(atDurability('normal'), 'set_text')),
      unit: 'x',
      min: 0.9,
      moonshot: 0.95,
    },
    { goal: 'SET p99 at 50 clients', value: get('kvb', 'set_text')?.p99Ms, unit: 'ms', max: 10, moonshot: 5 },
    { goal: '/health p99 while 50 clients write durably', value: healthUnderWrites?.p99Ms, unit: 'ms', max: 5, moonshot: 2 },
    // The other targets each hot path is held to.
    { goal: 'GET hit vs bare Fastify GET', value: get('kvb', 'get_hit')?.vsBaseline, unit: 'x', min: 0.75 },
    { goal: 'GET hit vs bare node:http GET', value: get('kvb', 'get_hit')?.vsNodeHttp, unit: 'x' },
    { goal: 'SET vs bare Fastify POST', value: get('kvb', 'set_text')?.vsBaseline, unit: 'x', min: 0.6 },
    { goal: 'SET vs bare node:http POST', value: get('kvb', 'set_text')?.vsNodeHttp, unit: 'x' },
    { goal: 'SET over 100 buckets vs bare Fastify POST', value: get('kvb', 'set_spread')?.vsBaseline, unit: 'x', min: 0.5 },
    { goal: 'counter PATCH vs bare Fastify POST', value: get('kvb', 'counter')?.vsBaseline, unit: 'x', min: 0.6 },
    { goal: 'token GET vs bare Fastify GET', value: get('kvb', 'auth_get')?.vsBaseline, unit: 'x', min: 0.8 },
    { goal: 'GET hit p99', value: get('kvb', 'get_hit')?.p99Ms, unit: 'ms', max: 15 },
    {
      goal: `GET at ${large} vs ${small}`,
      value: ratio(find(large!, 'get_hit'), find(small!, 'get_hit')),
      unit: 'x',
      min: 0.9,
    },
    {
      goal: `SET at ${large} vs ${small}`,
      value: ratio(find(large!, 'set_text'), find(small!, 'set_text')),
      unit: 'x',
      min: 0.9,
    },
    { goal: `list 100 with values at ${large}`, value: get(large!, 'list_100')?.requestsPerSecond, unit: 'req/s', min: 1500 },
    {
      // Anonymous memory: the memory-mapped database file is the OS page cache (reported as RSS beside it).
      goal: `server RssAnon under load at ${large}`,
      value: Math.max(...results.filter((r) => r.target === large).map((r) => r.peakRssAnonMB)),
      unit: 'MB',
      max: 150,
    },
    ...watchDelays.map((w) => ({ goal: `watch delay p99 (${w.where})`, value: w.p99Ms, unit: 'ms' as const, max: 1000 })),
    ...webhookTargets(webhookCost),
    { goal: 'start-up vs bare Fastify', value: startup?.ratio, unit: 'x', max: 1.2 },
    { goal: `CLI round trip (${cli?.label ?? 'cli_get'}) vs node -e 0`, value: cli?.ratio, unit: 'x', max: 1.5 },
    {
      goal: 'PostgreSQL GET hit vs SQLite GET hit',
      value: ratio(find('kvb postgres', 'get_hit'), find('kvb', 'get_hit')),
      unit: 'x',
      min: 0.9,
    },
    // The bench's SET is one hot bucket: the rate of one instance on it against SQLite's SET.
    {
      goal: 'PostgreSQL SET on one hot bucket, one instance, vs SQLite SET',
      value: ratio(find('kvb postgres', 'set_text'), find('kvb', 'set_text')),
      unit: 'x',
      min: 1,
    },
    {
      goal: 'PostgreSQL SET over 100 buckets, one instance, vs SQLite SET',
      value: ratio(find('kvb postgres', 'set_spread'), find('kvb', 'set_text')),
      unit: 'x',
      min: 0.95,
    },
    {
      goal: 'PostgreSQL SET on one hot bucket, 50 clients, one instance',
      value: get('kvb postgres', 'set_text')?.requestsPerSecond,
      unit: 'req/s',
    },
    {
      goal: 'PostgreSQL txn of 10 vs SQLite txn of 10',
      value: ratio(find('kvb postgres', 'txn_10'), find('kvb', 'txn_10')),
      unit: 'x',
      min: 0.8,
    },
    { goal: 'PostgreSQL SET (synchronous_commit on) vs etcd put', value: get('kvb postgres', 'set_text')?.vsEtcd, unit: 'x', min: 1 },
    {
      goal: 'PostgreSQL SET on one hot bucket, two instances together vs one',
      value: ratio(find('kvb x2', 'set_text'), find('kvb', 'set_text')),
      unit: 'x',
      min: 1.2,
    },
    {
      goal: 'PostgreSQL SET on one hot bucket, three instances together vs one',
      value: ratio(find('kvb x3', 'set_text'), find('kvb', 'set_text')),
      unit: 'x',
      min: 1,
    },
    {
      goal: 'PostgreSQL SET over 100 buckets, two instances vs one',
      value: ratio(find('kvb x2', 'set_spread'), find('kvb', 'set_spread')),
      unit: 'x',
      min: 1.2,
    },
    {
      goal: 'PostgreSQL SET over 100 buckets, three instances vs one',
      value: ratio(find('kvb x3', 'set_spread'), find('kvb', 'set_spread')),
      unit: 'x',
      min: 1.2,
    },
  ];
  /** Whether `value` is on the good side of `bound` (at least a min, at most a max). */
  const holds = (t: Target, bound: number) => (t.min !== undefined ? t.value! >= bound : t.value! <= bound);
  const verdict = (t: Target) => {
    if (t.value === undefined || !Number.isFinite(t.value)) return 'not measured';
    const bar = t.min ?? t.max;
    if (bar === undefined) return '';
    if (!holds(t, bar)) return 'MISSED';
    return t.moonshot !== undefined && holds(t, t.moonshot) ? 'met (moonshot too)' : 'met';
  };

  const x = (v: number | undefined) => (v === undefined ? '' : `${v.toFixed(2)}x`);
  const machine = {
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model ?? 'unknown',
    node: process.version,
    os: `${process.platform} ${process.arch}`,
    date: new Date().toISOString(),
  };
  const lines: string[] = [];
  lines.push(
    `Machine: ${machine.cpus} CPUs (${machine.cpuModel}), Node ${machine.node}. autocannon -c ${settings.connections} -p ${settings.pipelining}, ` +
      `${settings.seconds} s per case after ${settings.warmupSeconds} s warm-up, ${settings.repeats} rounds; kvb backend ${settings.backend}.`,
    '',
    '| server | case | req/s (median) | spread | p50 ms | p99 ms | server CPU µs/req | request thread µs/req | peak RSS MB | peak RssAnon MB | x bare Fastify | x node:http | x webdis | x etcd |',
    '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  );
  for (const r of results) {
    const title = r.case === 'get' ? 'GET (fixed 100 B)' : r.case === 'post' ? 'POST (echo)' : CASES[r.case].title;
    lines.push(
      `| ${r.target} | ${title} | ${r.requestsPerSecond.toLocaleString('en-US')} | ±${Math.round(r.spreadPercent / 2)}% | ${r.p50Ms} | ${r.p99Ms} | ${r.cpuUsPerRequest} | ${r.threadCpuUsPerRequest} | ${r.peakRssMB} | ${r.peakRssAnonMB} | ${x(r.vsBaseline)} | ${x(r.vsNodeHttp)} | ${x(r.vsWebdis)} | ${x(r.vsEtcd)} |`,
    );
  }
  for (const [peer, why] of Object.entries(skipped)) lines.push('', `${peer}: ${why}`);
  if (startup)
    lines.push(
      '',
      `Start-up (spawn to first 200 from /health): kvb serve ${startup.kvbMs.toFixed(0)} ms, bare Fastify ${startup.baselineMs.toFixed(0)} ms (${x(startup.ratio)}).`,
    );
  if (cli) lines.push(`CLI round trip: ${cli.label} ${cli.kvbMs.toFixed(0)} ms, node -e 0 ${cli.nodeMs.toFixed(0)} ms (${x(cli.ratio)}).`);
  if (portability) {
    lines.push(
      '',
      `Export and import of ${portability.keys.toLocaleString('en-US')} keys (${(portability.exportBytes / 2 ** 20).toFixed(0)} MiB of NDJSON): ` +
        `export ${portability.exportKeysPerSecond.toLocaleString('en-US')} keys/s (${portability.exportSeconds.toFixed(1)} s, snapshot included), ` +
        `import ${portability.importKeysPerSecond.toLocaleString('en-US')} keys/s (${portability.importSeconds.toFixed(1)} s, staging, check and apply).`,
    );
  }
  if (healthUnderWrites) {
    const h = healthUnderWrites;
    lines.push(
      '',
      `/health while 50 clients SET with --durability full (${h.samples} probes, one at a time): p50 ${h.p50Ms} ms, p99 ${h.p99Ms} ms, max ${h.maxMs} ms (quiet p99 ${h.quietP99Ms} ms).`,
    );
  }
  for (const w of watchDelays) {
    lines.push('', `Watch write-to-event delay (${w.where}), ${w.writes} writes: p50 ${w.p50Ms} ms, p99 ${w.p99Ms} ms, max ${w.maxMs} ms.`);
  }
  lines.push(...webhookLines(webhookCost));
  lines.push('', '| target | measured | goal (must) | moonshot | verdict |', '|---|---:|---:|---:|---|');
  for (const t of targets) {
    const value =
      t.value === undefined || !Number.isFinite(t.value) ? '-' : t.unit === 'x' ? x(t.value) : `${Math.round(t.value * 10) / 10} ${t.unit}`;
    const goal =
      t.min !== undefined
        ? `>= ${t.min}${t.unit === 'x' ? 'x' : ` ${t.unit}`}`
        : t.max !== undefined
          ? `<= ${t.max}${t.unit === 'x' ? 'x' : ` ${t.unit}`}`
          : '';
    const moonshot =
      t.moonshot === undefined ? '' : `${t.min !== undefined ? '>=' : '<='} ${t.moonshot}${t.unit === 'x' ? 'x' : ` ${t.unit}`}`;
    lines.push(`| ${t.goal} | ${value} | ${goal} | ${moonshot} | ${verdict(t)} |`);
  }
  const markdown = lines.join('\n');
  console.log(markdown);

  mkdirSync(join(flags.out!, '..'), { recursive: true });
  writeFileSync(
    flags.out!,
    `${JSON.stringify({ machine, settings: { ...settings, cases: flags.cases }, skipped, results, startup, cli, portability, watchDelays, webhookCost, healthUnderWrites, targets: targets.map((t) => ({ ...t, verdict: verdict(t) })), markdown }, null, 2)}\n`,
  );
  log(`results written to ${flags.out}`);
}

async function cleanup() {
  for (const service of services.reverse()) await service.stop().catch(() => undefined);
  driver?.stop();
  rmSync(tmp, { recursive: true, force: true });
}

process.once('SIGINT', () => void cleanup().then(() => process.exit(130)));
try {
  await main();
} catch (error) {
  console.error(error);
  process.exitCode = 1;
} finally {
  await cleanup();
}
