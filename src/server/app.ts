import cors from '@fastify/cors';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import Fastify, {
  type FastifyInstance,
  type FastifyRequest,
  type FastifyHttpOptions,
  type FastifyServerOptions,
  type onRequestHookHandler,
} from 'fastify';
import type { Registry } from 'prom-client';
import { envelope } from '../errors.js';
import type { Store } from '../store/store.js';
import { BucketCache } from './bucket-cache.js';
import type { Clock } from './clock.js';
import { VerificationScheduler } from '../auth/verification-scheduler.js';
import { verificationLimits } from './crypto-threads.js';
import { registerVerificationMetrics } from './verification-metrics.js';
import { installErrorHandling, sendError } from './error-handling.js';
import { clientAddress, decorateClientAddress, noteClientAddress } from './client-address.js';
import { checkQuery, parseQuery } from './query-params.js';
import { FastLane } from './fast-lane.js';
import type { LaneCounts } from './write-lane.js';
import { createKvbServer } from './http-server.js';
import { setupMetrics } from './plugins/metrics.js';
import { RequestLogController, redactUrl } from './request-log-controller.js';
import { requestId } from './request-id.js';
import { type CreationLimiter, setupRateLimits } from './plugins/rate-limits.js';
import { bucketRoutes } from './routes/bucket-routes.js';
import { consoleRoute } from './routes/console-route.js';
import { keyRoutes } from './routes/key-routes.js';
import { listRoute } from './routes/list-route.js';
import { type Lifecycle, healthAnswer, operationalRoutes } from './routes/operational-routes.js';
import { registerApiDocs } from './api-docs.js';
import { tokenRoute } from './routes/token-route.js';
import { webhookRoutes } from './routes/webhook-routes.js';
import type { WebhookHealth } from './webhooks/webhook-health.js';
import { transactionRoute } from './routes/transaction-route.js';
import type { ServerConfig } from './server-config.js';
import type { ServerContext } from './server-context.js';
import type { TlsFiles } from './tls.js';
import { WatchHub, registerWatchMetrics } from './watch-hub.js';
import { lazySchemaCompilers } from './lazy-schemas.js';

/** How long another instance's change to a bucket's credentials can go unseen on a shared store. */
export const SHARED_CACHE_MAX_AGE_MS = 1000;

/**
 * Logs for a person at a terminal: one line per entry. An access line reads `request GET /path 200
 * 0.8 ms` (its other fields, the request id, route, size and client address, are in the json
 * format); pino-pretty's default put each field on a line of its own, nine lines per request.
 */
const PRETTY_OPTIONS = {
  translateTime: 'SYS:standard',
  singleLine: true,
  messageFormat: '{msg}{if method} {method} {url} {status} {ms} ms{end}',
  ignore: 'pid,hostname,req_id,method,route,url,status,ms,bytes,ip',
};

/** Where log lines go instead of stdout (tests that run the app in their own process read them). */
export interface LogStream {
  write(line: string): void;
}

function loggerOptions(level: string, format: 'json' | 'pretty', stream?: LogStream): FastifyServerOptions['logger'] {
  return {
    level,
    ...(stream && { stream }),
    // pino-pretty runs in pino's worker thread, loaded only when asked for.
    ...(format === 'pretty' ? { transport: { target: 'pino-pretty', options: PRETTY_OPTIONS } } : {}),
    serializers: {
      req: (req: FastifyRequest) => ({ method: req.method, url: redactUrl(req.url), ip: clientAddress(req) ?? null }),
    },
    redact: ['req.headers.authorization', 'req.headers.cookie'],
  };
}

/** `--trust-proxy`: a hop count, or a comma-separated list of addresses and CIDRs (Fastify's trustProxy). */
export function trustProxyOption(value: string | undefined): number | string[] | undefined {
  if (value === undefined || value.trim() === '') return undefined;
  if (/^\d+$/.test(value.trim())) return Number(value.trim());
  return value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

/** @fastify/cors's options; the origin comes from `--cors-origin`. */
const CORS_OPTIONS = {
  methods: ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'],
  allowedHeaders: ['Authorization', 'Content-Type', 'Accept', 'If-Match', 'If-None-Match', 'Kvb-Include'],
  exposedHeaders: [
    'Kvb-Type',
    'Kvb-Expires-At',
    'Kvb-Error-Detail',
    'Kvb-Next-Cursor',
    'Link',
    'Location',
    'WWW-Authenticate',
    'Allow',
    'Retry-After',
    'ETag',
    'Kvb-Revision',
    'Kvb-Create-Revision',
    'Kvb-Failed-Checks',
    'Kvb-Usage-Keys',
    'Kvb-Usage-Bytes',
    'Kvb-Quota-Keys',
    'Kvb-Quota-Bytes',
    'Kvb-History-Floor',
    'RateLimit',
    'RateLimit-Policy',
    'X-RateLimit-Limit',
    'X-RateLimit-Remaining',
    'X-RateLimit-Reset',
  ],
  maxAge: 600,
};
/** Access-Control-Expose-Headers exactly as @fastify/cors writes it. */
const CORS_EXPOSED = CORS_OPTIONS.exposedHeaders.join(', ');

/** Builds the whole service without listening, so tests and the bench can start it however they like. */
export async function buildApp(
  store: Store,
  config: ServerConfig,
  options: { tls?: TlsFiles; logStream?: LogStream; clock?: Clock } = {},
): Promise<FastifyInstance> {
  const clock = options.clock ?? Date.now;
  const schemas = lazySchemaCompilers();
  const logs = new RequestLogController({ disableRequestLogging: true, requestIdLogLabel: 'req_id' }, config.accessLog);
  // The server's handler: the fast lane first (enabled below, once the app is built), then Fastify.
  const lane = new FastLane();
  let handler: ((req: IncomingMessage, res: ServerResponse) => void) | undefined;
  const dispatch = (fastify: (req: IncomingMessage, res: ServerResponse) => void) => {
    handler = lane.wrap(fastify);
    return handler;
  };
  const app = Fastify(fastifyOptions(config, { ...options, logs, schemas, dispatch }));
  const anyOrigin = config.corsOrigin === '*';
  decorateClientAddress(app);
  app.addHook('onRequest', requestHook(anyOrigin));
  // A second after listening, so a readiness probe right at start is not kept waiting behind
  // Ajv's first compile (about 40 ms). (kvb serve listens on app.server: no onListen hook.)
  app.server.once('listening', () => setTimeout(schemas.warm, 1000).unref());
  installErrorHandling(app);
  const measured = setupMetrics(logs, store, clock);
  const metrics = measured.registry;
  store = measured.store;
  await registerCors(app, config.corsOrigin);
  await registerApiDocs(app);
  const limitCreation = await setupRateLimits(app, config);
  const ctx = serverContext(app, store, config, clock, metrics);
  await registerRoutes(app, ctx, { metrics, limitCreation });
  // The lane does none of the per-request work these settings add (a counter per requester, the
  // client address behind a proxy, an origin list to match): with any of them, Fastify answers all.
  if (anyOrigin && !config.rateLimit && trustProxyOption(config.trustProxy) === undefined) {
    lane.enable({
      store,
      buckets: ctx.buckets,
      clock,
      log: app.log,
      logs,
      healthBody: JSON.stringify(healthAnswer(config)),
      webhookHealth: app.webhookHealth,
      maxValueBytes: config.maxValueBytes,
    });
  }
  if (!handler) throw new Error('Fastify did not call serverFactory');
  app.decorate('dispatch', handler);
  app.decorate('laneCounts', lane.taken);
  return app;
}

/** What Fastify is built with besides the config: the log controller, the schema compilers, the server's handler. */
interface AppParts {
  tls?: TlsFiles;
  logStream?: LogStream;
  logs: RequestLogController;
  schemas: ReturnType<typeof lazySchemaCompilers>;
  dispatch: (fastify: (req: IncomingMessage, res: ServerResponse) => void) => (req: IncomingMessage, res: ServerResponse) => void;
}

function fastifyOptions(config: ServerConfig, { tls, logStream, logs, schemas, dispatch }: AppParts): FastifyHttpOptions<Server> {
  return {
    logger: loggerOptions(config.logLevel, config.logFormat, logStream),
    // Fastify's two lines per request are off; the controller logs one access line per request.
    requestIdHeader: false,
    genReqId: (req: { headers: Record<string, string | string[] | undefined> }) => requestId(req.headers['x-request-id']),
    // X-Forwarded-For counts only from the proxies named (never from any client by default); the
    // access log and the per-address limits both need the client's address, not the proxy's.
    // (Fastify accepts a hop count at run time; its types omit the number form.)
    trustProxy: (trustProxyOption(config.trustProxy) ?? false) as boolean | string[],
    logController: logs,
    exposeHeadRoutes: false,
    return503OnClosing: false,
    bodyLimit: 16 * 1024,
    // A slow or idle client cannot hold a connection for long: headers must arrive within 15 s
    // (checked every second), a whole request within 30 s, an idle keep-alive lasts 65 s. On the
    // TLS port the handshake gets the same 15 s (Node's default is 120 s), set below.
    http: { headersTimeout: config.headersTimeoutMs, connectionsCheckingInterval: 1_000 },
    requestTimeout: 30_000,
    connectionTimeout: 0,
    keepAliveTimeout: 65_000,
    // Query strings are decoded in one place, which refuses malformed percent-encoding (query-params.ts).
    routerOptions: { maxParamLength: 65_535, querystringParser: parseQuery },
    // Validation must neither coerce nor silently drop: an unknown PATCH field is a 400, null stays null.
    ajv: { customOptions: { allowUnionTypes: true, coerceTypes: false, removeAdditional: false, useDefaults: false, allErrors: false } },
    // Route schemas compile once the server listens (or on first use), not before (lazy-schemas.ts).
    schemaController: { compilersFactory: schemas.builders },
    frameworkErrors: (error, _request, reply) =>
      sendError(reply, 'bad_request', error.code === 'FST_ERR_BAD_URL' ? 'malformed percent-encoding in the URL' : error.message),
    serverFactory: (handler, serverOptions) =>
      createKvbServer(dispatch(handler), {
        ...(serverOptions as unknown as Parameters<typeof createKvbServer>[1]),
        ...(tls && { tls: { ...tls, handshakeTimeout: config.headersTimeoutMs } }),
      }),
    clientErrorHandler: (error, socket) => {
      if (!socket.writable) return socket.destroy(error);
      const body = JSON.stringify(envelope('bad_request', 'malformed HTTP request'));
      // Ending only our side left the socket held (FIN-WAIT-2) for as long as the client kept its
      // side open: once the answer is flushed, the socket is destroyed.
      socket.end(
        `HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
          `X-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n${body}`,
        () => socket.destroy(),
      );
    },
  };
}

/**
 * The hook every request runs. The request id comes back only when asked for (the request sent
 * X-Request-Id, the id its log line carries) and on every error answer (error-handling.ts), where
 * a client has a reason to quote it. On every answer it was one of a GET hit's 12 header lines: 52
 * bytes, and about half a microsecond of Node validating and writing the line (measured in a
 * microbenchmark). With any origin allowed, the CORS headers are constant: set here instead of by
 * @fastify/cors's own hook (about 1 µs per request, measured). Only a request with an Origin (a
 * browser's cross-origin one) gets them: they were 370 of the 812 bytes of a GET answer to every
 * other client. `Vary: Origin` keeps a cache from serving one kind of answer for the other.
 */
function requestHook(anyOrigin: boolean): onRequestHookHandler {
  return (request, reply, done) => {
    // Read while the socket is there: a refusal mid-body can drop it before the access log runs.
    noteClientAddress(request);
    if (request.headers['x-request-id'] !== undefined) reply.header('x-request-id', request.id);
    if (anyOrigin) {
      reply.header('vary', 'Origin');
      if (request.headers.origin !== undefined)
        reply.header('access-control-allow-origin', '*').header('access-control-expose-headers', CORS_EXPOSED);
    }
    try {
      checkQuery(request);
    } catch (err) {
      return done(err as Error);
    }
    done();
  };
}

async function registerCors(app: FastifyInstance, corsOrigin: string): Promise<void> {
  if (corsOrigin === '*') {
    // The plugin answers preflights only (its hook runs for its OPTIONS route alone, inside this
    // context); every other answer gets the constant headers from the onRequest hook.
    await app.register(async (preflight) => preflight.register(cors, { ...CORS_OPTIONS, origin: '*' }));
  } else {
    await app.register(cors, { ...CORS_OPTIONS, origin: corsOrigin.split(',').map((o) => o.trim()) });
  }
}

/**
 * The routes' context, and the app's own state decorated on it (lifecycle, metrics, clock).
 * Everything a request changes lives here, on this app: two apps in one process share nothing.
 */
function serverContext(app: FastifyInstance, store: Store, config: ServerConfig, clock: Clock, metrics: Registry): ServerContext {
  const verifications = new VerificationScheduler(verificationLimits(config.verificationWaitSeconds));
  const ctx: ServerContext = {
    store,
    buckets: new BucketCache(store, store.flags.shared ? SHARED_CACHE_MAX_AGE_MS : Number.POSITIVE_INFINITY, verifications, clock),
    config,
    watch: new WatchHub(store),
    transfers: { exports: 0, imports: 0 },
    clock,
  };
  // Shutdown ends every watch stream at once (with `closed`) instead of waiting for them: run-server
  // calls endStreams before it waits for open requests; app.close() (tests) does it through preClose.
  const endStreams = () => ctx.watch.closeAll('the server is shutting down');
  app.decorate('endStreams', endStreams);
  app.addHook('preClose', async () => endStreams());
  registerWatchMetrics(metrics, ctx.watch);
  registerVerificationMetrics(metrics, verifications);
  const lifecycle: Lifecycle = { draining: false };
  app.decorate('lifecycle', lifecycle);
  app.decorate('metricsRegistry', metrics);
  app.decorate('clock', clock);
  app.decorate('webhookHealth', { lag: () => undefined } satisfies WebhookHealth);
  return ctx;
}

async function registerRoutes(
  app: FastifyInstance,
  ctx: ServerContext,
  { metrics, limitCreation }: { metrics: Registry; limitCreation: CreationLimiter | undefined },
): Promise<void> {
  const { config } = ctx;
  await app.register(operationalRoutes, { ...ctx, metrics, lifecycle: app.lifecycle });
  await app.register(bucketRoutes, { ...ctx, limitCreation });
  await app.register(transactionRoute, ctx);
  await app.register(listRoute, ctx);
  await app.register(tokenRoute, ctx);
  await app.register(webhookRoutes, ctx);
  await app.register(keyRoutes, ctx);
  if (config.console) await app.register(consoleRoute, { ...(config.consoleDir !== undefined && { dir: config.consoleDir }) });
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Ends every open watch stream with `closed` (graceful shutdown must not wait for them). */
    endStreams(): void;
    /** Set `draining` on SIGTERM: /ready answers 503 from then on. */
    lifecycle: Lifecycle;
    /** What /metrics serves (also on the --metrics-listen listener). */
    metricsRegistry: Registry;
    /** The time this app decides by (its sweeper takes it too): `Date.now` unless buildApp was given one. */
    clock: Clock;
    /** The HTTP server's request handler (the fast lane, then Fastify): tests inject through it. */
    dispatch: (req: IncomingMessage, res: ServerResponse) => void;
    /** How many requests the lanes took (fast-lane.ts, write-lane.ts): the tests' proof that a lane answered. */
    laneCounts: LaneCounts;
    /** What /health says of webhook lag; `kvb serve` plugs its delivery loop in (webhook-health.ts). */
    webhookHealth: WebhookHealth;
  }
}
