/**
 * The `webhooks` case: SET throughput on a bucket with 0, 1 and 10 webhooks (a local receiver
 * answering 200, `--webhook-allow-private`), one kvb, the three in turn in every round, and the
 * delivery lag under that load. Each round waits for the webhooks to catch up before the next
 * load starts, so one bucket's backlog never runs during another's measurement.
 *
 * Lag: while the load runs, the bench PUTs a probe key every 25 ms and the receiver notes when
 * each webhook's request carrying it arrives; the lag is from sending the probe's PUT to that
 * arrival, so it holds the PUT's own time too (an upper bound on commit to receipt).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { LoadDriver } from './load-driver.js';
import { httpRequest, requestThreadCpuMs, serviceCpuMs } from './processes.js';
import type { HttpService } from './services.js';
import { KEYS, TEXT_VALUE, type Workload, createBucket } from './workloads.js';

export const WEBHOOK_COUNTS = [0, 1, 10] as const;
export const ADMIN = 'bench-webhooks-admin';
export const auth = { authorization: `Bearer ${ADMIN}` };
const PROBE_EVERY_MS = 25;
const CATCH_UP_MS = 120_000;

export interface WebhookCostResult {
  /** SET req/s per round, by webhooks on the bucket. */
  rates: Record<string, number[]>;
  /** Median over rounds of (rate with n webhooks / rate with none in the same round). */
  vsNone: Record<string, number>;
  /** Probe lag (ms), by webhooks on the bucket: every webhook's arrival of every probe. */
  lag: Record<string, { samples: number; p50Ms: number; p99Ms: number; maxMs: number }>;
  /** The longest wait after a round's load for the webhooks to catch up (s), by webhooks on the bucket. */
  catchUpSeconds: Record<string, number>;
  /** Events per delivered request, on average, by webhooks on the bucket. */
  eventsPerRequest: Record<string, number>;
  /**
   * Server CPU (µs) per SET, median over rounds, by webhooks on the bucket: the whole process
   * and its request thread (where delivery runs), from the load's start until the webhooks caught up.
   */
  cpuUsPerSet: Record<string, { process: number; requestThread: number }>;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;
const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
const round1 = (n: number) => Math.round(n * 10) / 10;

/** Answers every request 200 and notes, per probe key, when each request carrying it arrived. */
export async function startReceiver() {
  const arrivals = new Map<string, number[]>();
  let requests = 0;
  let events = 0;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const at = performance.now();
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { events: Array<{ key?: string }> };
      requests++;
      events += body.events.length;
      for (const e of body.events) if (e.key?.startsWith('probe/')) arrivals.set(e.key, [...(arrivals.get(e.key) ?? []), at]);
      res.writeHead(200).end('ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    arrivals,
    counts: () => ({ requests, events }),
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

/** PUTs probe keys one after another until `until` settles; returns each probe's send time. */
async function probe(url: string, bucket: string, prefix: string, until: Promise<unknown>): Promise<Map<string, number>> {
  let done = false;
  void until.finally(() => (done = true));
  const sent = new Map<string, number>();
  for (let i = 0; !done; i++) {
    const key = `probe/${prefix}${i}`;
    sent.set(key, performance.now());
    await httpRequest(`${url}/api/v1/${bucket}/${key}`, { method: 'PUT', headers: { 'content-type': 'text/plain' }, body: 'p' });
    await new Promise((resolve) => setTimeout(resolve, PROBE_EVERY_MS));
  }
  return sent;
}

/** Waits until every webhook of the bucket stands at its revision; returns the seconds waited. */
export async function catchUp(url: string, bucket: string): Promise<number> {
  const started = performance.now();
  for (;;) {
    const listing = await fetch(`${url}/api/v1/${bucket}/?format=json&limit=1`);
    await listing.arrayBuffer();
    const revision = Number(listing.headers.get('kvb-revision'));
    const hooks = JSON.parse((await httpRequest(`${url}/api/v1/webhooks/${bucket}`, { headers: auth })).body) as Array<{
      position: number;
    }>;
    const elapsed = performance.now() - started;
    if (hooks.every((h) => h.position >= revision) || Number.isNaN(revision)) return elapsed / 1000;
    if (elapsed > CATCH_UP_MS) throw new Error(`webhooks of ${bucket} did not catch up within ${CATCH_UP_MS / 1000} s`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

export async function measureWebhookCost(
  kvb: HttpService,
  driver: LoadDriver,
  settings: { seconds: number; warmupSeconds: number; repeats: number },
  log: (line: string) => void,
): Promise<WebhookCostResult> {
  const receiver = await startReceiver();
  try {
    const buckets = new Map<number, string>();
    for (const n of WEBHOOK_COUNTS) {
      const bucket = await createBucket(kvb.url, `&secret_key=${ADMIN}`);
      for (let i = 0; i < n; i++) {
        const added = await httpRequest(`${kvb.url}/api/v1/webhooks/${bucket}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...auth },
          body: JSON.stringify({ url: `${receiver.url}/${n}/${i}` }),
        });
        if (added.status !== 201) throw new Error(`could not add a webhook: ${added.status} ${added.body}`);
      }
      buckets.set(n, bucket);
    }
    const result: WebhookCostResult = { rates: {}, vsNone: {}, lag: {}, catchUpSeconds: {}, eventsPerRequest: {}, cpuUsPerSet: {} };
    const cpu = new Map<number, Array<{ process: number; requestThread: number }>>(WEBHOOK_COUNTS.map((n) => [n, []]));
    const lags = new Map<number, number[]>(WEBHOOK_COUNTS.map((n) => [n, []]));
    const counted = new Map<number, { requests: number; events: number }>(WEBHOOK_COUNTS.map((n) => [n, { requests: 0, events: 0 }]));
    for (let round = 0; round < settings.repeats; round++) {
      for (const n of WEBHOOK_COUNTS) {
        const bucket = buckets.get(n)!;
        const workload: Workload = {
          plan: Array.from({ length: KEYS }, (_, i) => ({
            method: 'POST' as const,
            path: `/api/v1/${bucket}/k${i}`,
            headers: { 'content-type': 'text/plain' },
            body: TEXT_VALUE,
          })),
        };
        if (settings.warmupSeconds > 0) await driver.load(kvb.url, workload, settings.warmupSeconds);
        await catchUp(kvb.url, bucket);
        const before = receiver.counts();
        const cpuBefore = { process: serviceCpuMs(kvb), requestThread: requestThreadCpuMs(kvb) };
        const load = driver.load(kvb.url, workload, settings.seconds);
        const sent = await probe(kvb.url, bucket, `${round}-`, load);
        const measured = await load;
        const waited = await catchUp(kvb.url, bucket);
        const perSet = (ms: number) => (ms * 1000) / Math.max(1, measured.total);
        cpu.get(n)!.push({
          process: perSet(serviceCpuMs(kvb) - cpuBefore.process),
          requestThread: perSet(requestThreadCpuMs(kvb) - cpuBefore.requestThread),
        });
        const after = receiver.counts();
        const c = counted.get(n)!;
        c.requests += after.requests - before.requests;
        c.events += after.events - before.events;
        for (const [key, at] of sent) for (const arrived of receiver.arrivals.get(key) ?? []) lags.get(n)!.push(arrived - at);
        (result.rates[n] ??= []).push(measured.requestsPerSecond);
        result.catchUpSeconds[n] = round1(Math.max(result.catchUpSeconds[n] ?? 0, waited));
        log(
          `  round ${round + 1} SET with ${n} webhooks: ${Math.round(measured.requestsPerSecond)} req/s, caught up ${waited.toFixed(1)} s after`,
        );
      }
    }
    for (const n of WEBHOOK_COUNTS) {
      const rates = result.rates[n]!;
      result.vsNone[n] = Math.round(median(rates.map((r, i) => r / result.rates[0]![i]!)) * 1000) / 1000;
      const sorted = lags.get(n)!.sort((a, b) => a - b);
      if (n > 0)
        result.lag[n] = {
          samples: sorted.length,
          p50Ms: round1(percentile(sorted, 50)),
          p99Ms: round1(percentile(sorted, 99)),
          maxMs: round1(sorted.at(-1) ?? Number.NaN),
        };
      const c = counted.get(n)!;
      if (n > 0) result.eventsPerRequest[n] = round1(c.events / Math.max(1, c.requests));
      const used = cpu.get(n)!;
      result.cpuUsPerSet[n] = {
        process: round1(median(used.map((u) => u.process))),
        requestThread: round1(median(used.map((u) => u.requestThread))),
      };
    }
    return result;
  } finally {
    await receiver.close();
  }
}

/** The verdict rows: one webhook costs at most 10% of SET throughput; the lag is held to the watch feed's bar. */
export function webhookTargets(r: WebhookCostResult | undefined) {
  return [
    { goal: 'SET with 1 webhook on the bucket vs none', value: r?.vsNone[1], unit: 'x' as const, min: 0.9 },
    { goal: 'SET with 10 webhooks on the bucket vs none', value: r?.vsNone[10], unit: 'x' as const },
    { goal: 'webhook delivery lag p99 under SET load (1 webhook)', value: r?.lag[1]?.p99Ms, unit: 'ms' as const, max: 1000 },
    { goal: 'webhook delivery lag p99 under SET load (10 webhooks)', value: r?.lag[10]?.p99Ms, unit: 'ms' as const },
  ];
}

const cpuText = (r: WebhookCostResult, n: number) => `${r.cpuUsPerSet[n]?.process} / ${r.cpuUsPerSet[n]?.requestThread}`;

/** The report's lines for the case. */
export function webhookLines(r: WebhookCostResult | undefined): string[] {
  if (!r) return [];
  const rate = (n: number) => Math.round(median(r.rates[n] ?? [])).toLocaleString('en-US');
  return [
    '',
    `SET with webhooks on the bucket (median req/s; same kvb, in turn each round): none ${rate(0)}, 1 ${rate(1)} (${r.vsNone[1]}x), 10 ${rate(10)} (${r.vsNone[10]}x). ` +
      `Probe lag, PUT sent to the receiver's arrival: 1 webhook p50 ${r.lag[1]?.p50Ms} ms, p99 ${r.lag[1]?.p99Ms} ms; 10 webhooks p50 ${r.lag[10]?.p50Ms} ms, p99 ${r.lag[10]?.p99Ms} ms. ` +
      `Events per request: ${r.eventsPerRequest[1]} (1), ${r.eventsPerRequest[10]} (10); longest catch-up after a round ${r.catchUpSeconds[1]} s (1), ${r.catchUpSeconds[10]} s (10). ` +
      `Server CPU per SET until caught up (process / request thread, µs): none ${cpuText(r, 0)}, 1 ${cpuText(r, 1)}, 10 ${cpuText(r, 10)}.`,
  ];
}
