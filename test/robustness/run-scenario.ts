import { join } from 'node:path';
import { dropSchema, postgresUrl, uniqueName } from '../helpers/backend.js';
import { ACCOUNTS, BANK_TOTAL, bankClient, openAccounts } from './bank.js';
import { killPrimary, lockCluster, onPrimary, switchover, waitHealthy } from './ha-cluster.js';
import type { RecordedHistory } from './history.js';
import { Instance, freePort, makeDataDir } from './instances.js';
import { lockHolder } from './locks.js';
import { Random } from './random.js';
import { Recorder, now } from './recorder.js';
import type { Scenario } from './scenarios.js';
import { send } from './send.js';
import { TcpProxy } from '../helpers/tcp-proxy.js';
import { type WatchControl, type WatchStats, watcher } from './watchers.js';
import { WEBHOOK_BUCKET_KEY, WebhookRun } from './webhooks.js';
import { type WorkloadContext, finalReads, registerClient, sleep } from './workload.js';
import { extraClients, prepareExtra, settleExtra } from './extra-workloads.js';

export interface RunOptions {
  seconds: number;
  seed: number;
  clients: number;
  ratePerClient: number;
  /** Teardown steps of everything started, run in reverse on exit (also on Ctrl-C by run.ts). */
  cleanups: Array<() => Promise<void> | void>;
  log: (line: string) => void;
}

export interface ScenarioResult {
  history: RecordedHistory;
  recorder: Recorder;
  watch: WatchStats & { watchers: number; finalRevision: number | undefined; caughtUp: boolean };
  faults: string[];
  /** Errors of the run itself (a client that threw, a fault that failed): the scenario fails on any. */
  errors: string[];
  wallMs: number;
}

/** How long before the end the faults stop, so the last reads see the healed system. */
const SETTLE_MS = 2000;

/** Runs `step` and records its teardown to run later, newest first. */
function defer(options: RunOptions, cleanup: () => Promise<void> | void): void {
  options.cleanups.push(cleanup);
}

/** Runs the scenario's teardowns registered since `mark`, newest first, each bounded and failure-tolerant. */
export async function cleanupFrom(options: RunOptions, mark: number): Promise<void> {
  while (options.cleanups.length > mark) {
    const step = options.cleanups.pop()!;
    await Promise.race([Promise.resolve().then(step), sleep(95_000)]).catch((err: unknown) => options.log(`  cleanup: ${String(err)}`));
  }
}

async function createBucket(instance: Instance, secretKey?: string): Promise<string> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const ex = await send(`${instance.url}/api/v1/`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: `email=robustness@example.com&default_ttl=0${secretKey ? `&secret_key=${secretKey}` : ''}`,
    });
    if (ex.answer?.status === 201) return ex.answer.text.trim();
    await sleep(250);
  }
  throw new Error('could not create the bucket');
}

/** The bucket's revision, from whichever instance answers. */
async function bucketRevision(instances: Instance[], bucket: string): Promise<number | undefined> {
  for (let attempt = 0; attempt < 40; attempt++) {
    const instance = instances[attempt % instances.length]!;
    const ex = await send(`${instance.url}/api/v1/${bucket}/?format=json&limit=1`);
    const rev = ex.answer?.status === 200 ? Number(ex.answer.headers['kvb-revision']) : NaN;
    if (Number.isSafeInteger(rev)) return rev;
    await sleep(250);
  }
  return undefined;
}

export async function runScenario(scenario: Scenario, options: RunOptions): Promise<ScenarioResult> {
  const started = now();
  const mark = options.cleanups.length;
  const errors: string[] = [];
  const faults: string[] = [];
  const random = new Random(options.seed);
  const recorder = new Recorder(scenario.name);
  const instances: Instance[] = [];
  try {
    // The database: a SQLite file, or a schema of its own on PostgreSQL (dropped at the end).
    let db: string;
    let proxy: TcpProxy | undefined;
    if (scenario.backend === 'sqlite') {
      db = join(makeDataDir(), 'kvb.db');
    } else {
      const schema = uniqueName(`kvb_robust_${scenario.name.replace(/\W/g, '_')}`);
      let base: string;
      if (scenario.backend === 'ha' || scenario.backend === 'ha-pgbouncer') {
        const unlock = await lockCluster();
        // Leave the cluster whole (primary + synchronous standby) for whoever uses it next.
        defer(options, async () => {
          await waitHealthy().catch((err: unknown) => errors.push(`the HA cluster did not become healthy again: ${String(err)}`));
          unlock();
        });
        await waitHealthy();
        base = scenario.backend === 'ha' ? process.env.KVB_TEST_HA_URL! : process.env.KVB_TEST_HA_PGBOUNCER_URL!;
        defer(options, () => onPrimary((c) => c.query(`drop schema if exists "${schema}" cascade`)).then(() => {}));
      } else {
        base = scenario.backend === 'pgbouncer' ? process.env.KVB_TEST_PGBOUNCER_URL! : process.env.KVB_TEST_POSTGRES_URL!;
        defer(options, () => dropSchema(schema));
      }
      if (scenario.nemesis === 'cut') {
        const target = new URL(base);
        proxy = new TcpProxy(target.hostname, Number(target.port || 5432));
        await proxy.open();
        const p = proxy;
        defer(options, () => p.close());
        target.host = `127.0.0.1:${proxy.port}`;
        base = target.toString();
      }
      db = postgresUrl({ schema }, base);
    }

    for (let i = 0; i < scenario.instances; i++) {
      const instance = new Instance(String.fromCharCode(97 + i), await freePort(), db, scenario.args, scenario.env);
      instances.push(instance);
      defer(options, () => instance.stop());
    }
    // The first alone (it runs the migrations), then the others together.
    await instances[0]!.start();
    await Promise.all(instances.slice(1).map((instance) => instance.start()));
    const bucket = await createBucket(instances[0]!, scenario.webhooks ? WEBHOOK_BUCKET_KEY : undefined);
    await openAccounts(instances[0]!.url, bucket);
    const webhooks = scenario.webhooks ? new WebhookRun(instances, bucket, random) : undefined;
    if (webhooks) {
      defer(options, () => webhooks.close());
      await webhooks.start();
    }

    let running = true;
    const ctx: WorkloadContext = { bucket, instances, recorder, running: () => running, random, ratePerClient: options.ratePerClient };
    const clientErrors = (what: string) => (err: unknown) => {
      errors.push(`${what}: ${err instanceof Error ? err.message : String(err)}`);
    };

    // Watchers first (from revision 0, so they see the accounts opening too), each starting on another instance than the last.
    const control: WatchControl = { abort: false };
    const watchStats: WatchStats = { events: 0, segments: 0, resets: 0, closed: 0 };
    const scoped = await prepareExtra(scenario.extra, ctx);
    const watcherCount = Math.max(2, scenario.instances) + scoped.length;
    const watching = Array.from({ length: watcherCount }, (_, i) =>
      watcher(recorder, instances, bucket, i + 1, control, watchStats, scoped[i - (watcherCount - scoped.length)]).catch(
        clientErrors(`watcher ${i}`),
      ),
    );
    defer(options, () => {
      control.abort = true;
    });
    // Faults must find the watchers connected, so they are cut too.
    for (let waited = 0; watchStats.segments < watcherCount && waited < 30_000; waited += 100) await sleep(100);
    if (watchStats.segments < watcherCount) errors.push(`the watchers did not connect within 30 s`);

    // The workload's time starts now: starting instances on a loaded machine can take seconds.
    const workStarted = now();
    const clients = [
      ...Array.from({ length: options.clients }, (_, i) => registerClient(ctx, i).catch(clientErrors(`client ${i}`))),
      ...Array.from({ length: 2 }, (_, i) => bankClient(ctx, i + 1).catch(clientErrors(`bank client ${i}`))),
      ...(scenario.locks ? Array.from({ length: 3 }, (_, i) => lockHolder(ctx, i, errors).catch(clientErrors(`lock holder ${i}`))) : []),
      ...extraClients(scenario.extra, ctx, errors, clientErrors),
    ];

    // The fault, while the clients run; every fault is healed before the last SETTLE_MS.
    const runMs = options.seconds * 1000;
    const faultUntil = workStarted + Math.max(1000, runMs - SETTLE_MS);
    const faulting = () => now() < faultUntil && errors.length === 0;
    const fault = (async () => {
      const pickInstance = () => random.pick(instances);
      switch (scenario.nemesis) {
        case 'none':
          return;
        case 'kill':
          while (faulting()) {
            await sleep(random.int(800, 2000));
            if (!faulting()) break;
            const victim = pickInstance();
            webhooks?.killed();
            await victim.kill();
            faults.push(`kill -9 ${victim.name}`);
            await sleep(random.int(0, 500));
            await victim.start();
          }
          return;
        case 'pause':
          while (faulting()) {
            await sleep(random.int(800, 2000));
            if (!faulting()) break;
            const victim = pickInstance();
            // Up to past the watchers' 6 s stall limit, so they resume elsewhere while the instance is stopped.
            const ms = random.int(1000, 8000);
            victim.pause();
            faults.push(`SIGSTOP ${victim.name} ${ms} ms`);
            await sleep(ms);
            victim.resume();
          }
          return;
        case 'cut':
          while (faulting()) {
            // Spaced so the pools reconnect and work flows between cuts (each cut costs every pooled connection).
            await sleep(random.int(1500, 3000));
            if (!faulting()) break;
            if (random.chance(0.5)) {
              faults.push(`cut ${proxy!.cut()} connections`);
            } else {
              const ms = random.int(700, 1300);
              await proxy!.refuse();
              faults.push(`refuse ${ms} ms`);
              await sleep(ms);
              await proxy!.open();
            }
          }
          return;
        case 'switchover':
          await sleep(Math.min(2000, runMs / 4));
          // Back and forth while the run lasts: each switchover demotes a node that stays reachable (as a standby).
          do faults.push(await switchover());
          while (faulting());
          return;
        case 'kill-holder':
          // Spaced near the lease (6 s), so most kills find a holder that took over from the last.
          while (faulting()) {
            await sleep(random.int(3000, 6000));
            if (!faulting()) break;
            const holder = await webhooks!.leaseHolder(2000);
            const victim = holder ?? pickInstance();
            webhooks!.killed();
            await victim.kill();
            faults.push(`kill -9 ${victim.name}${holder ? ' (lease holder)' : ' (no holder found)'}`);
            await sleep(random.int(0, 500));
            await victim.start();
          }
          return;
        case 'kill-primary':
          await sleep(Math.min(2000, runMs / 4));
          faults.push(await killPrimary());
          return;
      }
    })().catch(clientErrors('fault'));
    await fault;
    webhooks?.heal();
    // Heal whatever the last fault left (a faulted instance is restarted in its loop; this is the safety net).
    for (const instance of instances) {
      instance.resume();
      if (!instance.running) await instance.start().catch(clientErrors(`restart ${instance.name}`));
    }
    if (proxy) await proxy.open().catch(() => {});
    // Writes and reads go on for a while on the healed system (a failover may have taken longer than the run).
    const healedAt = now();
    while (now() < Math.max(workStarted + runMs, healedAt + SETTLE_MS) && errors.length === 0) await sleep(100);
    running = false;
    await Promise.all(clients);
    await finalReads(ctx, errors);
    await settleExtra(scenario.extra, ctx, errors);

    // Each watcher catches up to the final revision (bounded), so the watch rules are checked up to a known revision.
    const finalRevision = await bucketRevision(instances, bucket);
    if (finalRevision === undefined) errors.push('could not read the final revision');
    control.finalRevision = finalRevision ?? 0;
    const caughtUp = await Promise.race([Promise.all(watching).then(() => true), sleep(30_000).then(() => false)]);
    control.abort = true;
    await Promise.all(watching);
    if (!caughtUp) errors.push(`the watchers did not reach revision ${finalRevision} within 30 s`);
    const webhookHistory = await webhooks?.finish(finalRevision, errors);

    return {
      // Every transfer takes at most the balance it read and checks that balance's revision: none goes negative.
      history: {
        ...recorder.history({ total: BANK_TOTAL, accounts: ACCOUNTS, nonNegative: true }),
        ...(webhookHistory && { webhooks: webhookHistory }),
        // SQLite commits inside the process: what a killed process took committed before it was gone, or never.
        ...(scenario.backend === 'sqlite' && { lives: Object.fromEntries(instances.map((i) => [i.name, i.lives.map((l) => ({ ...l }))])) }),
      },
      recorder,
      watch: { ...watchStats, watchers: watcherCount, finalRevision, caughtUp },
      faults,
      errors: errors.concat(
        instances.filter((i) => !i.running).map((i) => `instance ${i.name} is not running at the end:\n${i.logTail(10)}`),
      ),
      wallMs: now() - started,
    };
  } finally {
    await cleanupFrom(options, mark);
  }
}
