import type { FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';
import { KvbError } from '../../errors.js';
import { VERSION } from '../../version.js';
import { STORAGE_RETRY_AFTER_SECONDS } from '../../store/storage-errors.js';
import { credentialMatches } from '../operator-key.js';
import { storageNotReady } from '../readiness.js';
import type { ServerConfig } from '../server-config.js';
import type { ServerContext } from '../server-context.js';
import { operationalSchemas } from './operational-schemas.js';

/** Whether the server is shutting down (set on SIGTERM, before the drain starts). */
export interface Lifecycle {
  draining: boolean;
}

/** What /health answers (the fast lane, fast-lane.ts, sends the same, serialized once). */
export function healthAnswer(config: ServerConfig) {
  // max_value_bytes (an extension): clients check a value's size before sending it.
  return { status: 'ok', storage: 'ok', version: VERSION, max_value_bytes: config.maxValueBytes };
}

/** `/health`, `/ready`, `/metrics` and `/api-docs/openapi.json`, at the root. */
export async function operationalRoutes(
  app: FastifyInstance,
  ctx: ServerContext & { metrics: Registry; lifecycle: Lifecycle },
): Promise<void> {
  app.get(
    '/health',
    {
      exposeHeadRoute: true,
      schema: operationalSchemas.health,
    },
    // webhooks (only while some lag past a minute): liveness still says ok; it is a detail to look at.
    async () => {
      const lag = app.webhookHealth.lag();
      return { ...healthAnswer(ctx.config), ...(lag && { webhooks: lag }) };
    },
  );

  app.get(
    '/ready',
    {
      exposeHeadRoute: true,
      schema: operationalSchemas.ready,
    },
    async (_request, reply) => {
      // Draining: a load balancer stops sending here at once (a check of its own, beside the
      // storage probe below, so both can fail the readiness independently).
      if (ctx.lifecycle.draining) return reply.code(503).send({ status: 'degraded', storage: 'ok', version: VERSION, draining: true });
      // Storage: reachable, and on PostgreSQL with target_session_attrs=read-write, writable (see readiness.ts).
      const err = await storageNotReady(ctx.store);
      if (err === undefined) return { status: 'ok', storage: 'ok', version: VERSION };
      app.log.warn({ err }, 'readiness check failed');
      return reply
        .code(503)
        .header('retry-after', STORAGE_RETRY_AFTER_SECONDS)
        .send({ status: 'degraded', storage: 'error', version: VERSION });
    },
  );

  // With --metrics-listen, /metrics is served only there (metrics-listener.ts), not to API clients.
  if (ctx.config.metricsListen === undefined) {
    app.get('/metrics', { schema: operationalSchemas.metrics }, async (request, reply) => {
      const token = ctx.config.metricsToken;
      if (token !== undefined && !credentialMatches(request, token)) {
        throw new KvbError('unauthorized', 'metrics need Authorization: Bearer with the metrics token');
      }
      const text = await ctx.metrics.metrics();
      return reply.type(ctx.metrics.contentType).send(text);
    });
  }

  app.get('/api-docs/openapi.json', { schema: operationalSchemas.openapi }, async () => app.swagger());
}
