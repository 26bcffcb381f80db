/**
 * `npm run bench:profile -- --case get_hit`: where a kvb server's CPU time goes under one bench case.
 * Starts `kvb serve` (the installed bundle) with `--cpu-prof`, drives the case with autocannon in a
 * forked load generator, stops the server, and sums the profile's self time by where the code lives:
 * kvb's own modules (named by esbuild's `// src/...` markers in the bundle), each package, Node's
 * internals, native code and GC. Each thread gets its own profile (Node writes one per worker):
 * the request thread's first, then the SQLite writer thread's (its own bundle,
 * dist/sqlite-writer-worker.cjs), then any other. Only the samples taken while the measured load
 * ran are summed (not start-up, the warm-up or shutdown). The .cpuprofile files stay in the temp dir for Chrome DevTools.
 * `--startup` profiles start-up instead: spawn to the first 200 from /health, then stop. `--db URL`
 * runs kvb on that database (PostgreSQL) instead of a temp SQLite file; `--durability full` profiles
 * SQLite's durable writes. `--webhooks N` (with `--case set_text`) puts N webhooks to a local
 * receiver on the SET bucket (the `webhooks` bench case's setup) and counts until they caught up.
 */
import { mkdtempSync, readFileSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { forkLoadDriver } from './load-driver.js';
import { freePort, httpRequest, requestThreadCpuMs, serviceCpuMs, spawnLogged, stopChild, waitForOk } from './processes.js';
import { KVB_BIN, kvbArgs } from './services.js';
import { ADMIN, auth, catchUp, startReceiver } from './webhook-cost.js';
import { CASES, type CaseName, KEYS, TEXT_VALUE, type Workload, createBucket, kvbWorkloads, prepareKvb } from './workloads.js';

const ROOT = new URL('..', import.meta.url).pathname;

const { values: flags } = parseArgs({
  options: {
    case: { type: 'string', default: 'get_hit' },
    duration: { type: 'string', default: '5' },
    connections: { type: 'string', default: '50' },
    top: { type: 'string', default: '25' },
    startup: { type: 'boolean', default: false },
    db: { type: 'string' },
    durability: { type: 'string' },
    webhooks: { type: 'string', default: '0' },
    /** Also the time spent in (inclusive of callees) each function whose "name place" matches this pattern. */
    inclusive: { type: 'string' },
    /** warn leaves the access log out; info profiles it too, as kvb serve runs by default. */
    'log-level': { type: 'string', default: 'warn' },
    help: { type: 'boolean', default: false },
  },
});
if (flags.help) {
  console.log(
    `Usage: npm run bench:profile -- [--case ${Object.keys(CASES).join('|')}] [--duration S] [--top N] [--startup] [--db postgres://…] [--durability normal|full] [--log-level warn|info] [--webhooks N] [--inclusive REGEX]`,
  );
  process.exit(0);
}

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  /** µs on the system's monotonic clock, which process.hrtime reads too. */
  startTime: number;
}

/** The system's monotonic clock in µs (a profile's sample times are on it). */
const monotonicUs = () => Number(process.hrtime.bigint() / 1000n);

/** The measured load's start and end (monotonic µs): samples outside it (start-up, warm-up, shutdown) are not summed. */
let measured: { from: number; to: number } | undefined;

/** The bundle's module markers: line number → `src/...` or `node_modules/<package>`. */
function bundleModules(file: string): Array<{ line: number; module: string }> {
  const marks: Array<{ line: number; module: string }> = [];
  readFileSync(file, 'utf8')
    .split('\n')
    .forEach((text, line) => {
      const m = /^\/\/ (src\/\S+|node_modules\/(?:@[^/]+\/)?[^/]+)/.exec(text);
      if (m) marks.push({ line, module: m[1]! });
    });
  return marks;
}

function place(frame: ProfileNode['callFrame'], bundles: Map<string, Array<{ line: number; module: string }>>): string {
  const { url, functionName, lineNumber } = frame;
  if (!url) return functionName.startsWith('(') ? functionName : `native ${functionName || '(anonymous)'}`;
  if (url.startsWith('node:')) return `node ${url.slice(5).split('/')[0]}`;
  const path = url.replace(/^file:\/\//, '');
  // Any build's bundle (KVB_BENCH_BIN may name another checkout's), its markers read once.
  if (!bundles.has(path) && /\/dist\/[^/]+\.cjs$/.test(path)) bundles.set(path, bundleModules(path));
  const marks = bundles.get(path);
  if (marks) {
    let found = 'bundle (runtime)';
    for (const mark of marks) {
      if (mark.line > lineNumber) break;
      found = mark.module;
    }
    return found;
  }
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(path);
  return pkg ? `node_modules/${pkg[1]}` : path.replace(ROOT, '');
}

/** Which thread wrote a profile, from the code it ran. */
function threadOf(profile: CpuProfile): string {
  const urls = new Set(profile.nodes.map((n) => n.callFrame.url));
  const ran = (file: string) => [...urls].some((u) => u.includes(file));
  if (ran('sqlite-writer-worker')) return 'SQLite writer thread';
  if (ran('sqlite-checkpoint-worker')) return 'WAL checkpointer thread';
  return ran('kvb-server.cjs') ? 'request thread' : 'another thread';
}

const THREAD_ORDER = ['request thread', 'SQLite writer thread', 'WAL checkpointer thread', 'another thread'];

function summarize(profileFile: string, profile: CpuProfile, thread: string): void {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const bundles = new Map<string, Array<{ line: number; module: string }>>();
  const byPlace = new Map<string, number>();
  const byFunction = new Map<string, number>();
  let total = 0;
  let at = profile.startTime;
  profile.samples.forEach((id, i) => {
    const node = byId.get(id)!;
    const us = profile.timeDeltas[i] ?? 0;
    at += us;
    if (measured && (at < measured.from || at > measured.to)) return;
    total += us;
    const where = place(node.callFrame, bundles);
    byPlace.set(where, (byPlace.get(where) ?? 0) + us);
    const fn = `${node.callFrame.functionName || '(anonymous)'} ${where}`;
    byFunction.set(fn, (byFunction.get(fn) ?? 0) + us);
  });
  const idle = byPlace.get('(idle)') ?? 0;
  const busy = total - idle;
  const top = Number(flags.top);
  const show = (title: string, map: Map<string, number>) => {
    console.log(`\n${thread}: ${title} (share of busy time, ${(busy / 1000).toFixed(0)} ms busy of ${(total / 1000).toFixed(0)} ms)`);
    for (const [name, us] of [...map]
      .filter(([n]) => !n.startsWith('(idle)'))
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)) {
      console.log(`${((100 * us) / busy).toFixed(1).padStart(6)}%  ${name}`);
    }
  };
  show('Self time by where the code lives', byPlace);
  show('Self time by function', byFunction);
  if (flags.inclusive) show(`Time in functions matching /${flags.inclusive}/ and their callees`, inclusiveTime(profile, byId, bundles));
  console.log(`\nprofile: ${profileFile}`);
}

const hooks = Number(flags.webhooks);

/** A bucket with `n` webhooks to `receiver` and a SET workload on it (as the `webhooks` bench case). */
async function hookedWorkload(url: string, receiver: string, n: number): Promise<{ bucket: string; workload: Workload }> {
  const bucket = await createBucket(url, `&secret_key=${ADMIN}`);
  for (let i = 0; i < n; i++) {
    const added = await httpRequest(`${url}/api/v1/webhooks/${bucket}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...auth },
      body: JSON.stringify({ url: `${receiver}/${i}` }),
    });
    if (added.status !== 201) throw new Error(`could not add a webhook: ${added.status} ${added.body}`);
  }
  const plan = Array.from({ length: KEYS }, (_, i) => ({
    method: 'POST' as const,
    path: `/api/v1/${bucket}/k${i}`,
    headers: { 'content-type': 'text/plain' },
    body: TEXT_VALUE,
  }));
  return { bucket, workload: { plan } };
}

/** Each sample counted once for every distinct matching function on its stack (samples outside the measured load left out). */
function inclusiveTime(
  profile: CpuProfile,
  byId: Map<number, ProfileNode>,
  bundles: Map<string, Array<{ line: number; module: string }>>,
): Map<string, number> {
  const pattern = new RegExp(flags.inclusive ?? '');
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const stacks = new Map<number, Set<string>>();
  const matching = (id: number) => {
    let names = stacks.get(id);
    if (!names) {
      names = new Set();
      for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
        const frame = byId.get(at)!.callFrame;
        const name = `${frame.functionName || '(anonymous)'} ${place(frame, bundles)}`;
        if (pattern.test(name)) names.add(name);
      }
      stacks.set(id, names);
    }
    return names;
  };
  const time = new Map<string, number>();
  let at = profile.startTime;
  profile.samples.forEach((id, i) => {
    const us = profile.timeDeltas[i] ?? 0;
    at += us;
    if (measured && (at < measured.from || at > measured.to)) return;
    const names = matching(id);
    for (const name of names) time.set(name, (time.get(name) ?? 0) + us);
    if (names.size > 0) time.set('(any of them)', (time.get('(any of them)') ?? 0) + us);
  });
  return time;
}

async function main() {
  const tmp = mkdtempSync(join(tmpdir(), 'kvb-profile-'));
  const port = await freePort();
  const started = performance.now();
  // bin/kvb's own flag (its shebang line) plus the profiler's, which NODE_OPTIONS may not carry.
  const node = [process.execPath, '--max-semi-space-size=8', '--cpu-prof', `--cpu-prof-dir=${tmp}`];
  const child = spawnLogged(
    node[0]!,
    [
      ...node.slice(1),
      KVB_BIN,
      ...kvbArgs(port, flags.db ?? join(tmp, 'kvb.db'), [
        '--log-level',
        flags['log-level'],
        ...(flags.durability ? ['--durability', flags.durability] : []),
        ...(hooks > 0 ? ['--webhook-allow-private'] : []),
      ]),
    ],
    join(tmp, 'kvb.log'),
  );
  const url = `http://127.0.0.1:${port}`;
  await waitForOk(`${url}/health`);
  if (flags.startup) {
    console.log(`start-up: ${(performance.now() - started).toFixed(0)} ms to the first 200 from /health`);
  } else {
    const name = flags.case as CaseName;
    if (!(name in CASES)) throw new Error(`no case ${name}: one of ${Object.keys(CASES).join(', ')}`);
    if (hooks > 0 && name !== 'set_text') throw new Error('--webhooks goes with --case set_text');
    const receiver = hooks > 0 ? await startReceiver() : undefined;
    const hooked = receiver && (await hookedWorkload(url, receiver.url, hooks));
    const workload = hooked?.workload ?? kvbWorkloads(await prepareKvb(url))[name];
    const driver = forkLoadDriver(Number(flags.connections), 1);
    const server = { name: 'kvb', children: [child], stop: () => stopChild(child) };
    await driver.load(url, workload, 1); // warm-up, not counted (it is in the profile)
    if (hooked) await catchUp(url, hooked.bucket);
    const cpuBefore = serviceCpuMs(server);
    const threadBefore = requestThreadCpuMs(server);
    const countsBefore = receiver?.counts();
    const from = monotonicUs();
    const result = await driver.load(url, workload, Number(flags.duration));
    // With webhooks, until they delivered what the load wrote: their work is part of each SET's cost.
    if (hooked) await catchUp(url, hooked.bucket);
    measured = { from, to: monotonicUs() };
    const perRequest = (ms: number) => ((ms * 1000) / result.total).toFixed(0);
    const cpuMs = serviceCpuMs(server) - cpuBefore;
    const threadMs = requestThreadCpuMs(server) - threadBefore;
    driver.stop();
    await receiver?.close();
    console.log(
      `${CASES[name].title}${hooks > 0 ? ` with ${hooks} webhooks` : ''}: ${result.requestsPerSecond.toFixed(0)} req/s, p99 ${result.p99Ms} ms, ${perRequest(cpuMs)} µs server CPU per request, ${perRequest(threadMs)} µs on the request thread (profiler on)`,
    );
    if (receiver && countsBefore) {
      const c = receiver.counts();
      const requests = c.requests - countsBefore.requests;
      const events = c.events - countsBefore.events;
      console.log(`webhook requests ${requests}, events ${events} (${(events / Math.max(1, requests)).toFixed(1)} per request)`);
    }
  }
  await stopChild(child);
  const files = readdirSync(tmp).filter((f) => f.endsWith('.cpuprofile'));
  if (files.length === 0) throw new Error(`no profile was written in ${tmp} (see kvb.log there)`);
  const profiles = files.map((f) => {
    const profile = JSON.parse(readFileSync(join(tmp, f), 'utf8')) as CpuProfile;
    return { file: join(tmp, f), profile, thread: threadOf(profile) };
  });
  profiles.sort((a, b) => THREAD_ORDER.indexOf(a.thread) - THREAD_ORDER.indexOf(b.thread));
  for (const { file, profile, thread } of profiles) summarize(file, profile, thread);
}

await main();
