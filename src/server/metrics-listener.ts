import { type Server, createServer } from 'node:http';
import type { FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';
import { envelope } from '../errors.js';
import { credentialMatches } from './operator-key.js';

/**
 * `--metrics-listen`: /metrics (and /health and /ready, for probes on a private network) on a
 * listener of their own, loopback unless told otherwise, so the API port (and a proxy in front
 * of it) never exposes metrics. /health and /ready are answered by the app itself (inject), so
 * they say exactly what the API port says, the drain's 503 included. Plain HTTP: it is meant for
 * loopback or a private network; with `--metrics-token` /metrics also needs the bearer token.
 */
export async function startMetricsListener(
  app: FastifyInstance,
  registry: Registry,
  address: { host: string; port: number },
  token: string | undefined,
): Promise<Server> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const answer = (status: number, type: string, body: string, headers: Record<string, string> = {}) => {
      res
        .writeHead(status, { 'content-type': type, 'x-content-type-options': 'nosniff', ...headers })
        .end(req.method === 'HEAD' ? undefined : body);
    };
    const error = (kind: 'not_found' | 'method_not_allowed' | 'unauthorized', detail: string, headers: Record<string, string> = {}) => {
      const body = envelope(kind, detail);
      answer(body.error.code, 'application/json', JSON.stringify(body), { 'kvb-error-detail': detail, ...headers });
    };
    if (path !== '/metrics' && path !== '/health' && path !== '/ready')
      return error('not_found', 'this listener serves /metrics, /health and /ready');
    if (req.method !== 'GET' && req.method !== 'HEAD') return error('method_not_allowed', 'only GET and HEAD', { allow: 'GET, HEAD' });
    if (path === '/metrics') {
      if (token !== undefined && !credentialMatches(req, token)) {
        return error('unauthorized', 'metrics need Authorization: Bearer with the metrics token', {
          'www-authenticate': 'Bearer realm="kvb"',
        });
      }
      registry.metrics().then(
        (text) => answer(200, registry.contentType, text),
        (err: unknown) => {
          app.log.error({ err }, 'metrics collection failed');
          answer(500, 'application/json', JSON.stringify(envelope('internal_error', 'internal error')));
        },
      );
      return;
    }
    app.inject({ method: req.method as 'GET' | 'HEAD', url: path }).then(
      (probe) => answer(probe.statusCode, String(probe.headers['content-type'] ?? 'application/json'), probe.body),
      (err: unknown) => {
        app.log.error({ err }, 'probe failed');
        answer(500, 'application/json', JSON.stringify(envelope('internal_error', 'internal error')));
      },
    );
  });
  // Scrapers and probes keep connections alive; none lasts long enough to hold a shutdown.
  server.keepAliveTimeout = 5000;
  server.requestTimeout = 10_000;
  server.headersTimeout = 5000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host: address.host, port: address.port }, () => resolve());
  });
  return server;
}
