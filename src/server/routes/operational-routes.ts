import type { FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';
import { VERSION } from '../../version.js';
import type { ServerContext } from '../server-context.js';
import { operationalSchemas } from './schemas.js';

const READY_TIMEOUT_MS = 2000;

/** `/health`, `/ready`, `/metrics` and `/api-docs/openapi.json`, at the root. */
export async function operationalRoutes(app: FastifyInstance, ctx: ServerContext & { metrics: Registry }): Promise<void> {
  app.get(
    '/health',
    {
      exposeHeadRoute: true,
      schema: operationalSchemas.health,
    },
    // max_value_bytes (an extension): clients check a value's size before sending it.
    async () => ({ status: 'ok', storage: 'ok', version: VERSION, max_value_bytes: ctx.config.maxValueBytes }),
  );

  app.get(
    '/ready',
    {
      exposeHeadRoute: true,
      schema: operationalSchemas.ready,
    },
    async (_request, reply) => {
      let timer: NodeJS.Timeout | undefined;
      try {
        await Promise.race([
          ctx.store.ping(),
          new Promise((_, reject) => {
            timer = setTimeout(() => reject(new Error('storage ping timed out')), READY_TIMEOUT_MS);
          }),
        ]);
        return { status: 'ok', storage: 'ok', version: VERSION };
      } catch (err) {
        app.log.warn({ err }, 'readiness check failed');
        return reply.code(503).send({ status: 'degraded', storage: 'error', version: VERSION });
      } finally {
        clearTimeout(timer);
      }
    },
  );

  app.get('/metrics', { schema: operationalSchemas.metrics }, async (_request, reply) => {
    const text = await ctx.metrics.metrics();
    return reply.type(ctx.metrics.contentType).send(text);
  });

  app.get('/api-docs/openapi.json', { schema: operationalSchemas.openapi }, async () => app.swagger());
}
