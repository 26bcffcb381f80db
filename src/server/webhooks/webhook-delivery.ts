import type { FastifyBaseLogger } from 'fastify';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { Store } from '../../store/store.js';
import type { Clock } from '../clock.js';
import { DEFAULT_SERVER_CONFIG, type ServerConfig } from '../server-config.js';
import { WebhookDeliverer } from './webhook-deliverer.js';
import type { DeliveryOptions } from './webhook-options.js';

/** How often each instance of a shared store looks at its subscriptions while it has some (other instances' commits are seen this way). */
export const WEBHOOK_POLL_MS = 250;
/** ... and while it has none: a webhook added through another instance is found within this. */
export const WEBHOOK_IDLE_POLL_MS = 5000;
type WebhookSettings = Pick<ServerConfig, 'webhookAllowPrivate' | 'webhookTimeoutSeconds' | 'webhookRetrySeconds'> &
  Partial<Pick<ServerConfig, 'webhookLeaseMs'>>;

/** The delivery settings `kvb serve`'s flags ask for. */
export const deliveryOptions = (config: WebhookSettings, overrides: Partial<DeliveryOptions> = {}): DeliveryOptions => ({
  allowPrivate: config.webhookAllowPrivate,
  timeoutMs: config.webhookTimeoutSeconds * 1000,
  retryBoundMs: config.webhookRetrySeconds * 1000,
  pollMs: WEBHOOK_POLL_MS,
  idlePollMs: WEBHOOK_IDLE_POLL_MS,
  // Longer than a delivery can take, so a live holder renews it before it runs out.
  leaseMs: Math.max(config.webhookLeaseMs ?? DEFAULT_SERVER_CONFIG.webhookLeaseMs, config.webhookTimeoutSeconds * 2000),
  ...overrides,
});

/** Starts this instance's webhook deliveries (beside the sweeper) and their metrics; `stop` waits for those in flight. */
export function startWebhookDelivery(
  store: Store,
  config: WebhookSettings,
  log: FastifyBaseLogger,
  clock: Clock,
  registry: Registry | undefined,
  overrides: Partial<DeliveryOptions> = {},
): WebhookDeliverer {
  const deliverer = new WebhookDeliverer(store, clock, log, deliveryOptions(config, overrides));
  if (registry) registerWebhookMetrics(registry, deliverer, clock);
  return deliverer.start();
}

export function registerWebhookMetrics(registry: Registry, deliverer: WebhookDeliverer, clock: Clock): void {
  const { stats } = deliverer;
  new Counter({
    name: 'kvb_webhook_events_delivered_total',
    help: 'Changes this instance delivered to webhooks (acknowledged with a 2xx)',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(stats.delivered);
    },
  });
  new Counter({
    name: 'kvb_webhook_attempts_failed_total',
    help: 'Webhook deliveries by this instance that failed (no 2xx in time)',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(stats.failed);
    },
  });
  new Gauge({
    name: 'kvb_webhooks',
    help: 'Webhooks by state: active (delivering), retrying (failing, within the retry bound) or paused',
    labelNames: ['state'],
    registers: [registry],
    collect() {
      const counts = { active: 0, retrying: 0, paused: 0 };
      for (const s of stats.seen.values()) counts[s.state]++;
      for (const [state, n] of Object.entries(counts)) this.set({ state }, n);
    },
  });
  new Gauge({
    name: 'kvb_webhook_lag_revisions_max',
    help: 'The most revisions any webhook is behind its bucket',
    registers: [registry],
    collect() {
      this.set(Math.max(0, ...[...stats.seen.values()].map((s) => s.lagRevisions)));
    },
  });
  new Gauge({
    name: 'kvb_webhook_lag_seconds_max',
    help: 'The longest any webhook has had changes waiting',
    registers: [registry],
    collect() {
      const now = clock();
      this.set(Math.max(0, ...[...stats.seen.values()].map((s) => (s.pendingSince === null ? 0 : (now - s.pendingSince) / 1000))));
    },
  });
}
