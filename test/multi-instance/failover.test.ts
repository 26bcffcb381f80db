import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { type WatchEvent, connect } from '../../src/client/index.js';
import { lockCluster } from '../helpers/ha-cluster-lock.js';
import { THROUGH_PGBOUNCER, postgresUrl, uniqueName, withClient } from '../helpers/backend.js';
import { type Answer, call, createBucket, json } from '../helpers/http.js';
import { type RunningServer, startServer } from '../helpers/server.js';

/**
 * Two kvb instances on a real HA cluster (Patroni + etcd, a primary and a synchronous standby,
 * started by .ci/start-ha-cluster) through a planned switchover and a kill -9 of the primary's
 * postmaster, under writes and watchers on both instances. In the `pgbouncer` project the same
 * run goes through a PgBouncer on each node (the URL lists both): there the demoted node keeps
 * answering through its PgBouncer, as a standby, and a transaction whose check was read just
 * before fails with 409 if either read came from it (reads must come from a primary).
 */
const HA_URL = THROUGH_PGBOUNCER ? process.env.KVB_TEST_HA_PGBOUNCER_URL : process.env.KVB_TEST_HA_URL;
const HA_DIR = process.env.KVB_TEST_HA_DIR;
const skipped = !HA_URL || !HA_DIR;

/** A client's back-off between retries during a failover, and the polling interval below: no assertion depends on how long one lasts. */
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits for `probe` to hold (an event, polled every `every` ms); fails after `ms`. */
async function until(what: string, probe: () => Promise<boolean> | boolean, ms: number, every = 100): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await sleep(every);
  }
}

interface ClusterNode {
  name: string;
  rest: string;
  port: number;
  dataDir: string;
}
interface Member {
  name: string;
  role: string;
  state: string;
}

const nodes = (): ClusterNode[] => (JSON.parse(readFileSync(join(HA_DIR!, 'cluster.json'), 'utf8')) as { nodes: ClusterNode[] }).nodes;

async function restGet(url: string): Promise<Response | undefined> {
  return fetch(url, { signal: AbortSignal.timeout(2000) }).catch(() => undefined);
}

/** The cluster as Patroni sees it, from whichever node answers. */
async function members(): Promise<Member[]> {
  for (const node of nodes()) {
    const res = await restGet(`${node.rest}/cluster`);
    if (res?.ok) return ((await res.json()) as { members: Member[] }).members;
  }
  return [];
}

/** A leader taking writes and a running synchronous standby, as Patroni's health endpoints say. */
async function healthy(): Promise<{ leader: ClusterNode; standby: ClusterNode } | undefined> {
  let leader: ClusterNode | undefined;
  let standby: ClusterNode | undefined;
  for (const node of nodes()) {
    if ((await restGet(`${node.rest}/primary`))?.status === 200) leader = node;
    else if ((await restGet(`${node.rest}/sync`))?.status === 200) standby = node;
  }
  return leader && standby ? { leader, standby } : undefined;
}

async function waitHealthy(ms = 60_000): Promise<{ leader: ClusterNode; standby: ClusterNode }> {
  let found: Awaited<ReturnType<typeof healthy>>;
  await until('a primary with a synchronous standby', async () => (found = await healthy()) !== undefined, ms, 250);
  return found!;
}

/** How long a run may take, and so how long another run waits for the cluster. */
const RUN_TIMEOUT_MS = 240_000;

/** A plain connection to the current primary (for setup and clean-up only). */
async function onPrimary<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
  const { leader } = await waitHealthy();
  return withClient({ host: '127.0.0.1', port: leader.port, user: 'postgres', database: 'postgres' }, work);
}

interface Acked {
  keys: Array<[key: string, value: string]>;
  rev: number;
}

/** What the writers did: every acknowledged write with its revision, and every answer in time order. */
class Ledger {
  readonly acked: Acked[] = [];
  counterAcked = 0;
  counterAttempted = 0;
  readonly statuses = new Map<number, number>();
  readonly outcomes: Array<{ started: number; at: number; ok: boolean }> = [];
  readonly bad: string[] = [];
  /** Every failed answer, in order: status and detail. */
  readonly failures: string[] = [];
  /** 503s saying the COMMIT's answer was lost (the write may have been applied). */
  outcomeUnknown = 0;
  slowest = 0;

  note(answer: Answer, started: number, ok: boolean): void {
    const now = Date.now();
    this.slowest = Math.max(this.slowest, now - started);
    this.statuses.set(answer.status, (this.statuses.get(answer.status) ?? 0) + 1);
    this.outcomes.push({ started, at: now, ok });
    if (ok) return;
    const retryAfter = answer.headers.get('retry-after');
    const body = answer.text;
    this.failures.push(`${answer.status} ${answer.headers.get('kvb-error-detail') ?? body.slice(0, 160)}`);
    if (/may or may not have been applied/.test(body)) this.outcomeUnknown++;
    // During a failover: 503 in the error envelope with Retry-After, and nothing else.
    if (answer.status !== 503 || !retryAfter || !/"message":"service_unavailable"/.test(body))
      this.bad.push(`${answer.status} ${retryAfter} ${body}`);
  }

  /** First failed write at or after `from`, to the first successful write sent after that failure. */
  window(from: number): { ms: number; failures: number } | undefined {
    const after = this.outcomes.filter((o) => o.at >= from);
    const firstFail = after.find((o) => !o.ok);
    if (!firstFail) return undefined;
    const recovered = after.find((o) => o.ok && o.started >= firstFail.at);
    if (!recovered) return undefined;
    return { ms: recovered.at - firstFail.at, failures: after.filter((o) => !o.ok).length };
  }

  okSince(from: number): number {
    return this.outcomes.filter((o) => o.ok && o.at >= from).length;
  }
}

/**
 * A guard against a hang, not a latency bound: a request still unanswered after this is aborted,
 * which fails its writer and so the test (`await writing`). The slowest answer is only reported.
 */
const REQUEST_TIMEOUT_MS = 30_000;

async function timedCall(url: string, init: RequestInit = {}): Promise<Answer> {
  return call(url, { ...init, signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
}

/** One writer: sets of fresh keys, counter increments, or transactions with a check, through one instance. */
async function writer(
  kind: 'set' | 'counter' | 'txn',
  id: number,
  server: RunningServer,
  bucket: string,
  ledger: Ledger,
  running: () => boolean,
): Promise<void> {
  const base = `${server.api}/${bucket}`;
  let txnRev: number | null = null;
  let txnStale = false;
  for (let n = 0; running(); n++) {
    const started = Date.now();
    if (kind === 'set') {
      const key = `s${id}-${n}`;
      const answer = await timedCall(`${base}/${key}`, { method: 'PUT', body: `v${id}-${n}`, headers: { 'content-type': 'text/plain' } });
      const ok = answer.status === 200;
      ledger.note(answer, started, ok);
      if (ok) ledger.acked.push({ keys: [[key, `v${id}-${n}`]], rev: Number(answer.headers.get('kvb-revision')) });
    } else if (kind === 'counter') {
      ledger.counterAttempted++;
      const answer = await timedCall(`${base}/counter`, { method: 'PATCH', body: '+1' });
      const ok = answer.status === 200;
      ledger.note(answer, started, ok);
      if (ok) {
        ledger.counterAcked++;
        ledger.acked.push({ keys: [], rev: Number(answer.headers.get('kvb-revision')) });
      }
    } else {
      if (txnStale) {
        // The last transaction's outcome is unknown: read where its key stands before checking it again.
        const read = await timedCall(`${base}/t${id}`);
        if (read.status !== 200 && read.status !== 404) {
          // Backoff while the cluster has no primary: the read is retried, nothing is judged by the wait.
          await sleep(100);
          continue;
        }
        txnRev = read.status === 200 ? Number(read.headers.get('kvb-revision')) : null;
        txnStale = false;
      }
      const check = txnRev === null ? { check: `t${id}`, exists: false } : { check: `t${id}`, rev: txnRev };
      const answer = await timedCall(base, {
        method: 'POST',
        ...json({ txn: [check, { set: `t${id}`, value: `${n}` }, { set: `t${id}-${n}`, value: `${n}` }] }),
      });
      const ok = answer.status === 204;
      ledger.note(answer, started, ok);
      if (ok) {
        txnRev = Number(answer.headers.get('kvb-revision'));
        ledger.acked.push({ keys: [[`t${id}-${n}`, `${n}`]], rev: txnRev });
      } else {
        if (answer.status === 409) ledger.bad.push(`409 on a transaction whose check was read after the last answer: ${answer.text}`);
        txnStale = true;
      }
    }
    // Backoff after a failed call (no primary yet): pacing only; every outcome is judged by the ledger.
    if (!ledger.outcomes.at(-1)?.ok) await sleep(50);
  }
}

/** Every event a watcher (kvb/client's watch(), which resumes after dropped connections) yields. */
function watcher(
  server: RunningServer,
  bucket: string,
  since: number,
  stop: AbortSignal,
): { events: WatchEvent[]; done: Promise<unknown> } {
  const events: WatchEvent[] = [];
  const kv = connect({ url: server.url, bucket, retries: 0 });
  const done = (async () => {
    for await (const event of kv.watch({ since, signal: stop, maxBackoffMs: 500 })) events.push(event);
  })().catch((err: unknown) => (stop.aborted ? undefined : err));
  return { events, done };
}

describe.skipIf(skipped)(
  `a PostgreSQL primary failover under two instances${skipped ? ' (SKIPPED: KVB_TEST_HA_URL and KVB_TEST_HA_DIR are not set; start a cluster with .ci/start-ha-cluster)' : ''}`,
  () => {
    const servers: RunningServer[] = [];
    let schema: string | undefined;
    afterAll(async () => {
      await Promise.all(servers.map((s) => s.stop()));
      if (schema) await onPrimary((c) => c.query(`drop schema if exists "${schema}" cascade`)).catch(() => {});
    });

    it('switchover and kill -9 of the primary: 503 with Retry-After meanwhile, then every acknowledged write present with its revision, no revision twice, every watcher sees every revision once, and both instances serve without a restart', {
      // Its own run takes about 30 s; the bound also covers waiting for the other project's run.
      timeout: 2 * RUN_TIMEOUT_MS + 10_000,
    }, async () => {
      const unlock = await lockCluster(HA_DIR!, RUN_TIMEOUT_MS + 10_000);
      const stop = new AbortController();
      let running = true;
      let writing: Promise<unknown> = Promise.resolve();
      try {
        await waitHealthy();
        schema = uniqueName('kvb_failover');
        const db = postgresUrl({ schema }, HA_URL);
        for (let i = 0; i < 2; i++) servers.push(await startServer({ db, args: ['--pool-size', '4', '--sweep-interval', '1'] }));
        const [a, b] = servers as [RunningServer, RunningServer];
        const bucket = await createBucket(a.api, { default_ttl: '0' });

        const watchers = [watcher(a, bucket, 0, stop.signal), watcher(b, bucket, 0, stop.signal)];
        const ledger = new Ledger();
        const kinds = ['set', 'counter', 'txn'] as const;
        const writers = Array.from({ length: 6 }, (_, i) => writer(kinds[i % 3]!, i, i % 2 === 0 ? a : b, bucket, ledger, () => running));
        writing = Promise.all(writers).catch((err: unknown) => {
          running = false;
          throw err;
        });

        const report: string[] = [];
        const phase = async (name: string, act: () => Promise<void>) => {
          await until(`${name}: writes flowing first`, () => ledger.okSince(Date.now() - 1000) > 5, 30_000);
          const { leader } = await waitHealthy();
          const at = Date.now();
          const before503 = ledger.statuses.get(503) ?? 0;
          await act();
          // Over when a new primary takes writes through both instances, and writes have flowed for a while.
          await until(
            `${name}: a new primary`,
            async () => (await members()).some((m) => m.role === 'leader' && m.name !== leader.name),
            60_000,
            200,
          );
          // Through PgBouncer every write may wait out a switchover instead of failing: then there is no window to close.
          const recovered = () => ledger.window(at) !== undefined || !ledger.outcomes.some((o) => o.at >= at && !o.ok);
          await until(
            `${name}: writes after the failover`,
            () => recovered() && ledger.okSince(ledger.outcomes.at(-1)!.at - 1000) > 10,
            60_000,
          );
          const window = ledger.window(at);
          report.push(
            `${name}: unavailable ${window ? `${(window.ms / 1000).toFixed(1)} s` : 'never (no write failed)'}, ${(ledger.statuses.get(503) ?? 0) - before503} answers 503`,
          );
          // The old primary rejoins as the synchronous standby before the next phase.
          await waitHealthy(90_000);
        };

        // The primary turns read-only under load, its connections open (as a demoted primary's can stay):
        // writes meet SQLSTATE 25006, and kvb answers 503 (not 507) and /ready says not ready until it takes writes again.
        const readOnly = (on: boolean) =>
          onPrimary(async (c) => {
            await c.query(on ? 'alter system set default_transaction_read_only = on' : 'alter system reset default_transaction_read_only');
            await c.query('select pg_reload_conf()');
          });
        await until('writes flowing first', () => ledger.okSince(Date.now() - 1000) > 5, 30_000);
        const readOnlyAt = Date.now();
        const readOnly503 = ledger.statuses.get(503) ?? 0;
        await readOnly(true);
        try {
          await until(
            'both instances not ready while the primary is read-only',
            async () => (await Promise.all(servers.map((s) => call(`${s.url}/ready`)))).every((r) => r.status === 503),
            20_000,
          );
          await until(
            'writes refused while the primary is read-only',
            () => ledger.outcomes.some((o) => o.at > readOnlyAt && !o.ok),
            20_000,
          );
        } finally {
          await readOnly(false);
        }
        await until(
          'both instances ready again',
          async () => (await Promise.all(servers.map((s) => call(`${s.url}/ready`)))).every((r) => r.status === 200),
          20_000,
        );
        await until('writes after the primary took writes again', () => ledger.okSince(Date.now() - 500) > 5, 20_000);
        report.push(`read-only primary: ${(ledger.statuses.get(503) ?? 0) - readOnly503} answers 503`);

        await phase('switchover', async () => {
          const { leader, standby } = await waitHealthy();
          const res = await fetch(`${leader.rest}/switchover`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ leader: leader.name, candidate: standby.name }),
          });
          expect(res.status, await res.text()).toBe(200);
        });
        await phase('kill -9 of the primary postmaster', async () => {
          const { leader } = await waitHealthy();
          const pid = Number(readFileSync(join(leader.dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
          process.kill(pid, 'SIGKILL');
        });

        // The sweeper (under its lease) still runs after both failovers: an expiring key goes.
        const expiring = await timedCall(`${a.api}/${bucket}/expiring?ttl=1`, { method: 'PUT', body: 'x' });
        expect(expiring.status, expiring.text).toBe(200);
        await until(
          'the sweeper to remove an expired key after the failovers',
          () => watchers.every((w) => w.events.some((e) => e.type === 'expire' && e.key === 'expiring')),
          45_000,
        );

        running = false;
        await writing;
        const listing = await timedCall(`${b.api}/${bucket}/?format=json&limit=1`);
        expect(listing.status).toBe(200);
        const finalRev = Number(listing.headers.get('kvb-revision'));
        await until(
          'every watcher to reach the last revision',
          () => watchers.every((w) => (w.events.at(-1)?.revision ?? 0) >= finalRev),
          30_000,
        );
        stop.abort();
        const watchErrors = await Promise.all(watchers.map((w) => w.done));
        console.log(
          `failover (${THROUGH_PGBOUNCER ? 'through PgBouncer' : 'direct'}): ${report.join('; ')}; ${ledger.acked.length} writes acknowledged; ` +
            `answers by status ${JSON.stringify(Object.fromEntries(ledger.statuses))} (${ledger.outcomeUnknown} with the outcome unknown); slowest answer ${ledger.slowest} ms; final revision ${finalRev}`,
        );

        // Only 2xx and 503-with-Retry-After; nothing hung past its timeout; the watch feeds never gave up.
        const errorLines = servers.flatMap((s) =>
          s
            .logs()
            .split('\n')
            .filter((l) => /"level":50/.test(l) && !/storage unavailable/.test(l)),
        );
        expect(ledger.bad, errorLines.slice(0, 5).join('\n').slice(0, 6000)).toEqual([]);
        expect(watchErrors).toEqual([undefined, undefined]);

        // A write that committed without a 2xx was answered "may or may not have been applied", never a plain failure:
        // the revisions beyond the acknowledged writes (and the sweeper's expiring key and its expiry) are at most those.
        // Named when it fails: the committed changes no acknowledgement accounts for, from the watch feed.
        const ackedRevs = new Set(ledger.acked.map((w) => w.rev));
        const ackedAt = new Map(ledger.acked.flatMap((w) => w.keys.map(([key]) => [key, w.rev] as const)));
        const unaccounted = watchers[0]!.events
          .filter((e) => !ackedRevs.has(e.revision) && e.key !== 'expiring')
          .map((e) => ({ ...e, ackedAt: ackedAt.get(e.key) ?? null }));
        expect(
          finalRev - ledger.acked.length - 2,
          `unacknowledged changes: ${JSON.stringify(unaccounted.map((e) => `${e.type} ${e.key}@${e.revision} (acknowledged at ${e.ackedAt})`))}; non-2xx answers: ${JSON.stringify(ledger.failures.slice(-20))}`,
        ).toBeLessThanOrEqual(ledger.outcomeUnknown);

        // No two acknowledged writes share a revision.
        const revs = ledger.acked.map((w) => w.rev);
        expect(revs.every((r) => Number.isSafeInteger(r) && r > 0)).toBe(true);
        expect(new Set(revs).size).toBe(revs.length);

        // Every acknowledged write is there, with its value and revision (each key was written once).
        const missing: string[] = [];
        const keyed = ledger.acked.flatMap((w) => w.keys.map(([key, value]) => ({ key, value, rev: w.rev })));
        for (let i = 0; i < keyed.length; i += 16) {
          await Promise.all(
            keyed.slice(i, i + 16).map(async ({ key, value, rev }) => {
              const read = await timedCall(`${(i / 16) % 2 ? a.api : b.api}/${bucket}/${key}`);
              if (read.status !== 200 || read.text !== value || Number(read.headers.get('kvb-revision')) !== rev) {
                missing.push(`${key}: ${read.status} ${read.text} at ${read.headers.get('kvb-revision')}, acknowledged ${value} at ${rev}`);
              }
            }),
          );
        }
        expect(missing).toEqual([]);

        // The counter holds every acknowledged increment; one whose answer was lost may have landed too.
        const counter = await timedCall(`${a.api}/${bucket}/counter`);
        expect(counter.status).toBe(200);
        expect(Number(counter.text)).toBeGreaterThanOrEqual(ledger.counterAcked);
        expect(Number(counter.text)).toBeLessThanOrEqual(ledger.counterAttempted);

        // Each watcher saw every revision 1..final exactly once, with every acknowledged key at its revision.
        for (const w of watchers) {
          const seen = w.events.map((e) => `${e.revision}/${e.key}`);
          expect(new Set(seen).size).toBe(seen.length);
          const watchedRevs = [...new Set(w.events.map((e) => e.revision))];
          expect(watchedRevs).toEqual(Array.from({ length: finalRev }, (_, i) => i + 1));
          const byRev = new Set(seen);
          expect(keyed.filter(({ key, rev }) => !byRev.has(`${rev}/${key}`))).toEqual([]);
        }

        // Both instances serve and are ready, without a restart.
        for (const s of servers) {
          expect(s.process.exitCode).toBeNull();
          expect((await call(`${s.url}/ready`)).status).toBe(200);
          expect((await call(`${s.api}/${bucket}/after`, { method: 'PUT', body: 'ok' })).status).toBe(200);
          expect(s.logs()).not.toContain('unexpected error');
        }
      } finally {
        // A failed run stops its writers and watchers before afterAll stops the servers under them.
        running = false;
        stop.abort();
        await writing.catch(() => {});
        // Leave the cluster whole for the next run.
        await waitHealthy(90_000).catch(() => {});
        unlock();
      }
    });
  },
);
