import cors from '@fastify/cors';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import Fastify, { type FastifyInstance, type FastifyServerOptions, LogController } from 'fastify';
import { envelope } from '../errors.js';
import type { Store } from '../store/store.js';
import { VERSION } from '../version.js';
import { BucketCache } from './bucket-cache.js';
import { installErrorHandling, sendError } from './error-handling.js';
import { setupMetrics } from './plugins/metrics.js';
import { bucketRoutes } from './routes/bucket-routes.js';
import { keyRoutes } from './routes/key-routes.js';
import { listRoute } from './routes/list-route.js';
import { operationalRoutes } from './routes/operational-routes.js';
import { errorEnvelopeSchema } from './routes/schemas.js';
import { tokenRoute } from './routes/token-route.js';
import { transactionRoute } from './routes/transaction-route.js';
import type { ServerConfig } from './server-config.js';

/** How long another instance's change to a bucket's credentials can go unseen on a shared store. */
export const SHARED_CACHE_MAX_AGE_MS = 1000;

/** Credentials may ride in the query string; they never reach a log line. */
export function redactUrl(url: string): string {
  return url.replace(/([?&](?:access_token|key)=)[^&#]*/gi, '$1[redacted]');
}

function loggerOptions(level: string): FastifyServerOptions['logger'] {
  return {
    level,
    serializers: {
      req: (req: { method: string; url: string; ip?: string }) => ({ method: req.method, url: redactUrl(req.url), ip: req.ip }),
    },
    redact: ['req.headers.authorization', 'req.headers.cookie'],
  };
}

/** In the OpenAPI document, Fastify's wildcard path parameter `*` is the key. */
function renameWildcard(schema: unknown): unknown {
  const params = (schema as { params?: { properties?: Record<string, unknown>; required?: string[] } } | undefined)?.params;
  if (!params?.properties || !('*' in params.properties)) return schema;
  const { '*': key, ...rest } = params.properties;
  return { ...(schema as object), params: { ...params, properties: { ...rest, key }, required: ['bucket', 'key'] } };
}

/** Builds the whole service without listening, so tests and the bench can start it however they like. */
export async function buildApp(store: Store, config: ServerConfig): Promise<FastifyInstance> {
  const app = Fastify({
    logger: loggerOptions(config.logLevel),
    // Fastify's two lines per request are off; at debug level one access line is logged below.
    logController: new LogController({ disableRequestLogging: true }),
    exposeHeadRoutes: false,
    return503OnClosing: false,
    bodyLimit: 16 * 1024,
    // A slow or idle client cannot hold a connection for long: headers must arrive within 15 s
    // (checked every second), a whole request within 30 s, an idle keep-alive lasts 65 s.
    http: { headersTimeout: 15_000, connectionsCheckingInterval: 1_000 },
    requestTimeout: 30_000,
    connectionTimeout: 0,
    keepAliveTimeout: 65_000,
    routerOptions: { maxParamLength: 65_535 },
    // Validation must neither coerce nor silently drop: an unknown PATCH field is a 400, null stays null.
    ajv: { customOptions: { allowUnionTypes: true, coerceTypes: false, removeAdditional: false, useDefaults: false, allErrors: false } },
    frameworkErrors: (error, _request, reply) =>
      sendError(reply, 'bad_request', error.code === 'FST_ERR_BAD_URL' ? 'malformed percent-encoding in the URL' : error.message),
    clientErrorHandler: (error, socket) => {
      if (!socket.writable) return socket.destroy(error);
      const body = JSON.stringify(envelope('bad_request'));
      socket.end(
        `HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
      );
    },
  });

  if (['debug', 'trace'].includes(config.logLevel)) {
    app.addHook('onResponse', async (request, reply) => {
      request.log.debug({ method: request.method, url: redactUrl(request.url), status: reply.statusCode, ms: reply.elapsedTime }, 'request');
    });
  }

  installErrorHandling(app);
  const metrics = setupMetrics(app, store);

  await app.register(cors, {
    origin: config.corsOrigin === '*' ? '*' : config.corsOrigin.split(',').map((o) => o.trim()),
    methods: ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'],
    allowedHeaders: ['Authorization', 'Content-Type', 'Accept'],
    exposedHeaders: ['Kvb-Type', 'Kvb-Expires-At', 'Kvb-Error-Detail', 'Location', 'WWW-Authenticate', 'Allow'],
    maxAge: 600,
  });

  app.addSchema(errorEnvelopeSchema);
  await app.register(swagger, {
    openapi: {
      openapi: '3.0.3',
      info: { title: 'kvb', description: 'HTTP key-value bucket service', version: VERSION },
      tags: [
        { name: 'buckets', description: 'Create and manage buckets' },
        { name: 'keys', description: 'Values, counters, listing and transactions' },
        { name: 'tokens', description: 'Temporary tokens' },
        { name: 'operations', description: 'Health, readiness and metrics' },
      ],
      components: {
        securitySchemes: {
          bearer: { type: 'http', scheme: 'bearer', description: 'a bucket key or a temporary token' },
          basic: { type: 'http', scheme: 'basic', description: 'the username is the credential' },
          accessToken: { type: 'apiKey', in: 'query', name: 'access_token' },
          keyQuery: { type: 'apiKey', in: 'query', name: 'key' },
        },
      },
    },
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`) },
    // Fastify's wildcard `*` is the key: show it as {key}.
    transform: ({ schema, url }) => ({ schema: renameWildcard(schema) as never, url: url.replace(/\*$/, '{key}') }),
  });
  await app.register(swaggerUi, { routePrefix: '/swagger-ui' });

  const ctx = {
    store,
    buckets: new BucketCache(store, store.shared ? SHARED_CACHE_MAX_AGE_MS : Number.POSITIVE_INFINITY),
    config,
  };
  await app.register(operationalRoutes, { ...ctx, metrics });
  await app.register(bucketRoutes, ctx);
  await app.register(transactionRoute, ctx);
  await app.register(listRoute, ctx);
  await app.register(tokenRoute, ctx);
  await app.register(keyRoutes, ctx);
  return app;
}
