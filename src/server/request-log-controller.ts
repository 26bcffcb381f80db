import { type FastifyBaseLogger, type FastifyReply, type FastifyRequest, LogController } from 'fastify';

type LogControllerOptions = ConstructorParameters<typeof LogController>[0];
import { Tallies } from './plugins/tallies.js';
import { clientAddress } from './client-address.js';
import { type AccessFields, directAccessLine } from './access-line.js';

/** A failed access line or metric, said on the log if it still takes it. */
function failed(log: FastifyBaseLogger, err: unknown): void {
  try {
    log.error({ err }, 'the access log or request metrics failed for this request');
  } catch {
    // The log itself is what failed: there is nowhere left to say it.
  }
}

/** Credentials may ride in the query string; they never reach a log line. */
export function redactUrl(url: string): string {
  // Most URLs have no query: skip the regex (it was the largest kvb function in a GET's profile).
  if (!url.includes('?')) return url;
  return url.replace(/([?&](?:access_token|key)=)[^&#]*/gi, '$1[redacted]');
}

/** Upper bounds (seconds) of kvb_http_request_duration_seconds. */
const REQUEST_BOUNDS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];

/**
 * Fastify's log controller, which Fastify calls once per finished response whatever the hooks:
 * each request is tallied for the metrics and (unless --access-log is off) logged here, so
 * neither needs an onResponse hook (the hooks and prom-client's observe measured about 3 µs per
 * request on the hot path).
 */
export class RequestLogController extends LogController {
  readonly requests = new Tallies(REQUEST_BOUNDS);
  /** The lanes' logger and its line written directly (access-line.ts), made on its first line. */
  private direct?: { log: FastifyBaseLogger; write: ReturnType<typeof directAccessLine> };

  constructor(
    options: LogControllerOptions,
    readonly accessLog: boolean,
  ) {
    super(options);
  }

  /**
   * Fastify calls this from the response's `finish` event, outside every handler and hook: a
   * throw here (a log stream that fails, a metric that cannot be recorded) would be uncaught and
   * end the process. It is caught, and said once if the log still takes it.
   */
  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    try {
      this.complete(error, request, reply);
    } catch (err) {
      failed(request.log, err);
    }
  }

  private complete(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    if (!this.isLogDisabled(request)) super.requestCompleted(error, request, reply);
    const length = reply.getHeader('content-length');
    // The route pattern, not the URL: keys and bucket ids must not become label values.
    const route = request.routeOptions.url;
    this.record(
      request.log,
      undefined,
      request.method,
      route,
      request.url,
      reply.statusCode,
      reply.elapsedTime,
      length,
      clientAddress(request),
    );
  }

  /**
   * Tallies one answered request and writes its access line. `log` is the request's logger, which
   * carries the request id; the fast lane (fast-lane.ts), which makes no logger per request, passes
   * the app's and the id as `requestId`, giving the same line. It runs in the HTTP server's own
   * handler there, where a throw is as uncaught as in `finish`: caught the same way.
   */
  answered(...args: Parameters<RequestLogController['record']>): void {
    try {
      this.record(...args);
    } catch (err) {
      failed(args[0], err);
    }
  }

  private record(
    log: FastifyBaseLogger,
    requestId: string | undefined,
    method: string,
    route: string | undefined,
    url: string,
    status: number,
    ms: number,
    length: unknown,
    ip: string | undefined,
  ): void {
    this.requests.record(`${method} ${status} ${route}`, () => ({ method, route: route ?? 'unmatched', status }), ms / 1000);
    if (!this.accessLog) return;
    // The route pattern groups requests; the path (query credentials redacted) says which key.
    const fields: AccessFields = {
      method,
      route: route ?? null,
      url: redactUrl(url),
      status,
      ms: Math.round(ms * 100) / 100,
      bytes: length === undefined ? null : Number(length),
      ip: ip ?? null,
    };
    const direct = requestId === undefined ? undefined : this.directWriter(log);
    if (direct) direct(requestId!, fields);
    else log.info(requestId === undefined ? fields : { req_id: requestId, ...fields }, 'request');
  }

  private directWriter(log: FastifyBaseLogger): ReturnType<typeof directAccessLine> {
    if (this.direct?.log !== log) this.direct = { log, write: directAccessLine(log) };
    return this.direct.write;
  }
}
