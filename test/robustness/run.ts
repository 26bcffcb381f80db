import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { checkHistory } from './checkers/index.js';
import type { Verdict } from './history.js';
import { killAll, removeDataDirs } from './instances.js';
import { type RunOptions, cleanupFrom, runScenario } from './run-scenario.js';
import { SCENARIOS, type Scenario, missingService } from './scenarios.js';
import { runSelftest } from './selftest.js';

/**
 * `npm run robustness`: runs scenarios (a backend, its kvb instances, a fault) with many clients,
 * records what they saw (history.ts), and runs the checkers on each history. See README.md.
 */

/** ci: every CI scenario briefly (about 3 minutes in all on a 2-core machine); soak: longer, and every scenario. */
const PROFILES: Record<'ci' | 'soak', { seconds: number; rate: number; budgetMs: number }> = {
  ci: { seconds: 8, rate: 40, budgetMs: 20_000 },
  soak: { seconds: 120, rate: 40, budgetMs: 300_000 },
};

const HELP = `Usage: npm run robustness -- [options]

Runs the robustness scenarios: 12 clients (reads, writes, compare-and-set, create, delete,
counters, transactions with checks, prefix deletes, rollbacks) on hot keys, a bank of accounts,
and watchers, spread over every kvb instance of the scenario, while a fault is injected; then
checks each recorded history (linearizability per key, revisions, bank snapshots, watch feed).

Options:
  --profile ci|soak      ci (default): every CI scenario for ${PROFILES.ci.seconds} s each (about 3 minutes);
                         soak: every scenario for ${PROFILES.soak.seconds} s each
  --seconds N            seconds of workload per scenario (overrides the profile)
  --scenario A[,B]       only these scenarios (default: the profile's); --list shows them
  --seed N               the random seed (default: random; printed, so a run can be replayed)
  --clients N            register/counter clients (default 12)
  --rate N               requests per second per client, at most (default ${PROFILES.ci.rate}; 0 = unpaced)
  --keep DIR             write each scenario's history as JSON to DIR (Infinity written as null)
  --require-services     a scenario whose service is missing fails the run instead of SKIPPED
  --selftest             run the checkers' self-test (known-good and known-bad histories) and exit
  --list                 list the scenarios and exit
  --help                 this text

Environment: KVB_TEST_POSTGRES_URL (PostgreSQL scenarios), KVB_TEST_PGBOUNCER_URL (PgBouncer),
KVB_TEST_HA_URL and KVB_TEST_HA_DIR (the Patroni cluster of .ci/start-ha-cluster). A scenario
whose service is missing prints SKIPPED with the reason. Build first (npm run build): the
scenarios spawn bin/kvb.

Exit status: 0 when every scenario ran and every verdict is ok; 1 on an anomaly, an error of the
run, or an unchecked verdict (a history too large to search in the budget proves nothing, in
either profile); 2 on bad usage.`;

function usage(message: string): never {
  process.stderr.write(`robustness: ${message}\n(npm run robustness -- --help)\n`);
  process.exit(2);
}

const { values: flags } = (() => {
  try {
    return parseArgs({
      options: {
        profile: { type: 'string', default: 'ci' },
        seconds: { type: 'string' },
        scenario: { type: 'string' },
        seed: { type: 'string' },
        clients: { type: 'string', default: '12' },
        rate: { type: 'string' },
        keep: { type: 'string' },
        'require-services': { type: 'boolean', default: false },
        selftest: { type: 'boolean', default: false },
        list: { type: 'boolean', default: false },
        help: { type: 'boolean', default: false },
      },
      strict: true,
    });
  } catch (err) {
    usage((err as Error).message);
  }
})();

const log = (line: string) => process.stdout.write(`${line}\n`);

function positiveInt(name: string, text: string | undefined, fallback: number, min = 1): number {
  if (text === undefined) return fallback;
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n < min) usage(`--${name} must be an integer of at least ${min}`);
  return n;
}

const cleanups: RunOptions['cleanups'] = [];
let interrupted = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (interrupted) {
      killAll();
      process.exit(130);
    }
    interrupted = true;
    log(`\n${signal}: stopping the instances and dropping the schemas (again to force)…`);
    killAll();
    void cleanupFrom({ cleanups } as RunOptions, 0).finally(() => {
      removeDataDirs();
      process.exit(130);
    });
  });
}

function summarize(counts: Map<string, number>): string {
  const byKind = new Map<string, Record<string, number>>();
  for (const [key, n] of counts) {
    const [kind, outcome] = key.split(' ') as [string, string];
    const entry = byKind.get(kind) ?? {};
    entry[outcome] = n;
    byKind.set(kind, entry);
  }
  return [...byKind]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([kind, o]) => `${kind} ${o.ok ?? 0}/${o.fail ?? 0}/${o.unknown ?? 0}`)
    .join(', ');
}

async function main(): Promise<number> {
  if (flags.help) {
    log(HELP);
    return 0;
  }
  if (flags.list) {
    for (const s of SCENARIOS)
      log(
        `${s.name.padEnd(20)} ${s.backend}, ${s.instances} instance(s), fault: ${s.nemesis}${s.ci ? '' : ' (not in ci)'}${s.args.length ? `, ${s.args.join(' ')}` : ''}`,
      );
    return 0;
  }
  if (flags.selftest) {
    const cases = await runSelftest();
    for (const c of cases) log(`${c.pass ? 'pass' : 'FAIL'}  ${c.name}: expected ${c.expected}, got ${c.got}`);
    const failed = cases.filter((c) => !c.pass).length;
    log(`${cases.length - failed} passed, ${failed} failed`);
    return failed === 0 && cases.length > 0 ? 0 : 1;
  }
  if (flags.profile !== 'ci' && flags.profile !== 'soak') usage('--profile is ci or soak');
  const profileName = flags.profile as 'ci' | 'soak';
  const profile = PROFILES[profileName];
  const seconds = positiveInt('seconds', flags.seconds, profile.seconds, 3);
  const clients = positiveInt('clients', flags.clients, 12);
  const rate = positiveInt('rate', flags.rate, profile.rate, 0);
  const seed = positiveInt('seed', flags.seed, Math.floor(Math.random() * 2 ** 31), 0);
  let scenarios: Scenario[] = profileName === 'ci' ? SCENARIOS.filter((s) => s.ci) : SCENARIOS;
  if (flags.scenario) {
    const names = flags.scenario.split(',').map((n) => n.trim());
    const unknown = names.filter((n) => !SCENARIOS.some((s) => s.name === n));
    if (unknown.length) usage(`unknown scenario ${unknown.join(', ')} (--list shows them)`);
    scenarios = SCENARIOS.filter((s) => names.includes(s.name));
  }
  if (flags.keep) mkdirSync(flags.keep, { recursive: true });

  log(
    `robustness: profile ${profileName}, ${scenarios.length} scenario(s), ${seconds} s each, ${clients} clients at most ${rate || '∞'} req/s each, seed ${seed}`,
  );
  const started = Date.now();
  const problems: string[] = [];
  let skipped = 0;
  for (const [i, scenario] of scenarios.entries()) {
    if (interrupted) break;
    const missing = missingService(scenario);
    if (missing) {
      log(`\n== ${scenario.name}: SKIPPED (${missing})`);
      skipped++;
      if (flags['require-services']) problems.push(`${scenario.name}: SKIPPED but --require-services (${missing})`);
      continue;
    }
    const scenarioSeed = seed + i;
    log(`\n== ${scenario.name} (${scenario.backend}, ${scenario.instances} instance(s), fault: ${scenario.nemesis}, seed ${scenarioSeed})`);
    let result;
    try {
      result = await runScenario(scenario, { seconds, seed: scenarioSeed, clients, ratePerClient: rate, cleanups, log });
    } catch (err) {
      problems.push(`${scenario.name}: the run failed: ${err instanceof Error ? err.message : String(err)}`);
      log(`  ERROR: ${err instanceof Error ? err.stack : String(err)}`);
      continue;
    }
    const { recorder, watch } = result;
    log(`  operations (kind ok/fail/unknown): ${summarize(recorder.tally)}`);
    log(
      `  history: ${recorder.ops.length} ops (per key), ${recorder.bankReads.length} bank snapshots; not ok: ${[...recorder.reasons].map(([r, n]) => `${r}×${n}`).join(', ') || 'none'}`,
    );
    log(
      `  watch: ${watch.watchers} watchers, ${watch.events} events in ${watch.segments} segments (${watch.resets} resets, ${watch.closed} closed), final revision ${watch.finalRevision}`,
    );
    log(`  faults: ${result.faults.length ? summarizeFaults(result.faults) : 'none'}`);
    for (const e of result.errors) {
      log(`  ERROR: ${e}`);
      problems.push(`${scenario.name}: ${e.split('\n')[0]}`);
    }
    if (flags.keep) {
      const file = join(flags.keep, `${scenario.name}-${scenarioSeed}.json`);
      writeFileSync(
        file,
        JSON.stringify(result.history, (_k, v: unknown) => (v === Infinity ? null : v)),
      );
      log(`  history written to ${file}`);
    }
    const checkStarted = Date.now();
    let verdicts: Verdict[];
    try {
      verdicts = await checkHistory(result.history, { budgetMs: profile.budgetMs });
    } catch (err) {
      verdicts = [
        { checker: 'checkHistory', result: 'anomaly', details: [`threw: ${err instanceof Error ? err.stack : String(err)}`], examined: 0 },
      ];
    }
    for (const v of verdicts) {
      log(
        `  verdict ${v.checker}: ${v.result === 'ok' ? 'ok' : v.result.toUpperCase()} (${v.examined} examined)${v.details.length ? `\n    ${v.details.slice(0, 10).join('\n    ')}` : ''}`,
      );
      if (v.result === 'anomaly')
        problems.push(`${scenario.name} (seed ${scenarioSeed}): ${v.checker} found an anomaly: ${v.details[0] ?? ''}`);
      if (v.result === 'unchecked')
        problems.push(`${scenario.name} (seed ${scenarioSeed}): ${v.checker} is unchecked: ${v.details[0] ?? ''}`);
    }
    if (verdicts.length === 0) problems.push(`${scenario.name}: the checkers returned no verdict`);
    log(`  time: run ${(result.wallMs / 1000).toFixed(1)} s, check ${((Date.now() - checkStarted) / 1000).toFixed(1)} s`);
  }
  removeDataDirs();
  log(
    `\nrobustness: ${scenarios.length - skipped} scenario(s) run, ${skipped} skipped, in ${((Date.now() - started) / 1000).toFixed(0)} s`,
  );
  if (problems.length) log(`FAILED:\n  ${problems.join('\n  ')}`);
  else log('every verdict ok');
  // The closing line CI reads: scenarios, not operations.
  const failedScenarios = new Set(problems.map((p) => p.split(/[ :]/)[0])).size;
  log(
    `robustness: ${scenarios.length - skipped - Math.min(failedScenarios, scenarios.length - skipped)} passed, ${failedScenarios} failed, ${skipped} skipped`,
  );
  return problems.length ? 1 : 0;
}

function summarizeFaults(faults: string[]): string {
  const counts = new Map<string, number>();
  for (const f of faults) {
    const kind = f.replace(/\d+ (ms|connections)/, 'N $1');
    counts.set(kind, (counts.get(kind) ?? 0) + 1);
  }
  return [...counts].map(([k, n]) => (n > 1 ? `${k} ×${n}` : k)).join('; ');
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    log(`robustness: ${err instanceof Error ? err.stack : String(err)}`);
    killAll();
    process.exit(1);
  },
);
