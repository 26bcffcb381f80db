import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import type { Store } from '../../store/store.js';
import type { Clock } from '../clock.js';
import { STORE_OPS, type StoreOp, timedStore } from '../../store/timed-store.js';
import { VERSION } from '../../version.js';
import type { RequestLogController } from '../request-log-controller.js';
import { Tallies, scrapedMetric } from './tallies.js';

const KEY_COUNT_MAX_AGE_MS = 15_000;

const STORE_BOUNDS = [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1];

/**
 * Prometheus metrics: requests by route and status, latency, keys stored, build, sweeper,
 * storage latency by operation, entry cache and connection pool, and process defaults.
 * Returns the registry and the store to serve with: the same store, timed per operation.
 */
export function setupMetrics(logs: RequestLogController, store: Store, clock: Clock): { registry: Registry; store: Store } {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  // prom-client names three gauges `_total`, which Prometheus keeps for counters (promtool check
  // metrics refuses them); each is the sum of its by-type gauge (nodejs_active_handles{type}, …).
  for (const name of ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'])
    registry.removeSingleMetric(name);
  // Registered in the order /metrics lists them.
  registerRequestMetrics(registry, logs);
  registerKeyCount(registry, store, clock);
  new Gauge({ name: 'kvb_build_info', help: 'The running kvb version (always 1)', labelNames: ['version'], registers: [registry] })
    .labels({ version: VERSION })
    .set(1);
  registerStoreStats(registry, store);
  return { registry, store: timedWithMetrics(registry, store) };
}

/** Requests by route and status, and their latency, as the request log tallies them. */
function registerRequestMetrics(registry: Registry, logs: RequestLogController): void {
  const { requests } = logs;
  registry.registerMetric(
    scrapedMetric('kvb_http_requests_total', 'HTTP requests answered', 'counter', () =>
      requests.counterSamples('kvb_http_requests_total'),
    ) as never,
  );
  registry.registerMetric(
    scrapedMetric('kvb_http_request_duration_seconds', 'Time to answer an HTTP request', 'histogram', () =>
      requests.histogramSamples('kvb_http_request_duration_seconds'),
    ) as never,
  );
}

/** Keys stored: counting a large table is not free, so the figure is refreshed at most every 15 s. */
function registerKeyCount(registry: Registry, store: Store, clock: Clock): void {
  let keyCount = { value: 0, at: 0 };
  new Gauge({
    name: 'kvb_keys_stored',
    help: 'Keys stored, expired ones not yet swept included (refreshed at most every 15 s)',
    registers: [registry],
    async collect() {
      if (clock() - keyCount.at > KEY_COUNT_MAX_AGE_MS) keyCount = { value: await store.maintenance.countEntries(), at: clock() };
      this.set(keyCount.value);
    },
  });
}

/** Counts the store keeps in plain fields, exported when scraped (nothing is done per request). */
function registerStoreStats(registry: Registry, store: Store): void {
  const stats = store.stats;
  const fromStats = (name: string, help: string, read: () => number) => {
    let exported = 0;
    new Counter({
      name,
      help,
      registers: [registry],
      collect() {
        const now = read();
        this.inc(now - exported);
        exported = now;
      },
    });
  };
  fromStats('kvb_keys_expired_swept_total', 'Expired keys removed by the expiry sweeper of this instance', () => stats.sweptKeys);
  if (store.flags.cachesEntries) {
    fromStats('kvb_entry_cache_hits_total', 'Key reads answered from the in-memory entry cache', () => stats.cacheHits);
    fromStats('kvb_entry_cache_misses_total', 'Key reads that went to the database', () => stats.cacheMisses);
  }
  if (store.poolStats) {
    const poolStats = store.poolStats.bind(store);
    const pool = (name: string, help: string, read: (p: ReturnType<typeof poolStats>) => number) =>
      new Gauge({
        name,
        help,
        registers: [registry],
        collect() {
          this.set(read(poolStats()));
        },
      });
    pool('kvb_pg_pool_connections', 'PostgreSQL connections in the pool, busy or idle', (p) => p.total);
    pool('kvb_pg_pool_idle_connections', 'PostgreSQL connections in the pool waiting for work', (p) => p.idle);
    pool('kvb_pg_pool_waiting_requests', 'Queries waiting for a PostgreSQL connection', (p) => p.waiting);
  }
}

/** The store to serve with: the same store, each operation's time recorded by operation. */
function timedWithMetrics(registry: Registry, store: Store): Store {
  const storeOps = new Tallies(STORE_BOUNDS);
  registry.registerMetric(
    scrapedMetric(
      'kvb_store_operation_duration_seconds',
      'Time a storage operation took, by operation (failed ones included)',
      'histogram',
      () => storeOps.histogramSamples('kvb_store_operation_duration_seconds'),
    ) as never,
  );
  const opLabels = Object.fromEntries(STORE_OPS.map((op) => [op, () => ({ op })])) as Record<StoreOp, () => { op: string }>;
  return timedStore(store, (op, seconds) => storeOps.record(op, opLabels[op], seconds));
}
