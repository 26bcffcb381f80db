import type { FastifyInstance } from 'fastify';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Store } from '../../store/store.js';

const KEY_COUNT_MAX_AGE_MS = 15_000;

/** Prometheus metrics: requests by route and status, latency, keys stored, and process defaults. */
export function setupMetrics(app: FastifyInstance, store: Store): Registry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const labelNames = ['method', 'route', 'status'] as const;
  const requests = new Counter({ name: 'kvb_http_requests_total', help: 'HTTP requests answered', labelNames, registers: [registry] });
  const duration = new Histogram({
    name: 'kvb_http_request_duration_seconds',
    help: 'Time to answer an HTTP request',
    labelNames,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [registry],
  });
  // Counting a large table is not free, so the figure is refreshed at most every 15 s.
  let keyCount = { value: 0, at: 0 };
  new Gauge({
    name: 'kvb_keys_stored',
    help: 'Keys stored, expired ones not yet swept included (refreshed at most every 15 s)',
    registers: [registry],
    async collect() {
      if (Date.now() - keyCount.at > KEY_COUNT_MAX_AGE_MS) keyCount = { value: await store.countEntries(), at: Date.now() };
      this.set(keyCount.value);
    },
  });

  // Label children are looked up once per (method, route, status): hashing labels on every
  // request showed up in profiles of the hot path.
  const children = new Map<string, { count: Counter.Internal; time: Histogram.Internal<string> }>();
  app.addHook('onResponse', (request, reply, done) => {
    // The route pattern, not the URL: keys and bucket ids must not become label values.
    const route = request.routeOptions.url ?? 'unmatched';
    const id = `${request.method} ${route} ${reply.statusCode}`;
    let child = children.get(id);
    if (!child) {
      const labels = { method: request.method, route, status: reply.statusCode };
      child = { count: requests.labels(labels), time: duration.labels(labels) };
      children.set(id, child);
    }
    child.count.inc();
    child.time.observe(reply.elapsedTime / 1000);
    done();
  });
  return registry;
}
