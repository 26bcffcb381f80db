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
import { errorEnvelopeSchema, securitySchemes } from './routes/schemas.js';
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

type RouteSchema = Record<string, unknown> & { params?: { properties?: Record<string, unknown>; required?: string[] } };

/**
 * The OpenAPI view of a route schema: Fastify's wildcard path parameter `*` is the key, and a
 * `rawBody` (a body the route reads raw, with no JSON schema to validate it) is its request body.
 */
function openapiSchema(schema: RouteSchema | undefined): RouteSchema | undefined {
  if (!schema) return schema;
  const { rawBody, ...rest } = schema;
  const result: RouteSchema = rawBody === undefined ? rest : { ...rest, body: rawBody };
  // @fastify/swagger suffixes the operationId of a HEAD route; ours are unique already.
  if (typeof result.operationId === 'string') result.operationId = result.operationId.replace(/-head$/, '');
  const params = result.params;
  if (!params?.properties || !('*' in params.properties)) return result;
  const { '*': key, ...others } = params.properties;
  return { ...result, params: { ...params, properties: { ...others, key }, required: ['bucket', 'key'] } };
}

const API_DESCRIPTION = `An HTTP key-value store. Values live in buckets; each bucket has its own access policy.

**Try it here:** create a bucket (give it a \`secret_key\`, and a \`signing_key\` to mint tokens), then *Authorize*
with that secret key as the Bearer value, and set, read, list and count keys. Every request is sent to this server.

**Credentials**, looked up in this order (the first present is the only one used): \`Authorization: Bearer <credential>\`,
\`Authorization: Basic\` (the username is the credential), \`?access_token=\`, \`?key=\`. A bucket's \`secret_key\` is
admin, \`read_key\` reads and lists, \`write_key\` writes; a temporary token gets its permissions under its prefix.
A bucket with no key of a kind leaves that kind of access open to anonymous callers.

**Errors** are \`{"error":{"code":<status>,"message":<name>}}\`; the reason in words is in the \`Kvb-Error-Detail\` header.

**Values** are answered with the Content-Type of their type, plus \`Kvb-Type\` and (when they expire) \`Kvb-Expires-At\`.`;

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
      info: { title: 'kvb', description: API_DESCRIPTION, version: VERSION, license: { name: 'MIT' } },
      // Relative: the explorer sends every request to the server that served it.
      servers: [{ url: '/', description: 'this server' }],
      tags: [
        { name: 'buckets', description: 'Create and manage buckets' },
        { name: 'keys', description: 'Values, counters, listing and transactions' },
        { name: 'tokens', description: 'Temporary tokens' },
        { name: 'operations', description: 'Health, readiness, metrics and this document' },
      ],
      components: { securitySchemes: securitySchemes as never },
    },
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`) },
    transform: ({ schema, url }) => ({
      schema: openapiSchema(schema as RouteSchema | undefined) as never,
      url: url.replace(/\*$/, '{key}'),
    }),
  });
  // The explorer's assets are served from the package (no CDN); the policy keeps it that way.
  await app.register(swaggerUi, {
    routePrefix: '/swagger-ui',
    theme: { title: 'kvb API explorer' },
    uiConfig: { deepLinking: true, displayRequestDuration: true, docExpansion: 'list', defaultModelsExpandDepth: 0 },
    staticCSP:
      "default-src 'self'; base-uri 'self'; connect-src 'self'; font-src 'self' data:; form-action 'self'; " +
      "frame-ancestors 'self'; img-src 'self' data:; object-src 'none'; script-src 'self'; script-src-attr 'none'; " +
      "style-src 'self' 'unsafe-inline'",
  });

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
