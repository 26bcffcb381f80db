import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { type ErrorMessage, KvbError, STORAGE_FAILURES, envelope, messageForStatus } from '../errors.js';
import { rawPath } from './request-input.js';
import {
  STORAGE_RETRY_AFTER_SECONDS,
  StorageUnavailableError,
  isClientAbort,
  isStorageUnavailable,
  storageFullReason,
} from '../store/storage-errors.js';

/** Header values must be printable ASCII; details never contain secrets, but may echo input. */
const headerSafe = (s: string) => s.replace(/[^\x20-\x7e]/g, '?').slice(0, 300);

export function sendError(
  reply: FastifyReply,
  kind: ErrorMessage,
  detail: string,
  allow?: string[],
  headers?: Record<string, string>,
): FastifyReply {
  const body = envelope(kind, detail);
  reply.code(body.error.code).header('kvb-error-detail', headerSafe(detail)).header('x-request-id', reply.request.id);
  if (headers) reply.headers(headers);
  if (kind === 'unauthorized') reply.header('www-authenticate', 'Bearer realm="kvb"');
  if (allow) reply.header('allow', allow.join(', '));
  // An error replaces whatever a handler had set, including a value's type headers.
  reply.removeHeader('kvb-type').removeHeader('kvb-expires-at');
  if (!headers?.etag) reply.removeHeader('etag').removeHeader('kvb-revision');
  return reply.type('application/json').send(body);
}

/** Methods each known path serves; a request with another method gets 405 and this list in Allow. */
const KNOWN_PATHS: Array<[RegExp, string[]]> = [
  [/^\/api\/v1\/?$/, ['POST']],
  [/^\/api\/v1\/[^/]+$/, ['GET', 'HEAD', 'POST', 'PATCH', 'DELETE']],
  [/^\/api\/v1\/[^/]+\/$/, ['GET', 'DELETE']],
  [/^\/api\/v1\/[^/]+\/.+$/, ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE']],
  [/^\/(health|ready)$/, ['GET', 'HEAD']],
  [/^\/(metrics|api-docs\/openapi\.json)$/, ['GET']],
];

export function allowedMethods(path: string): string[] | undefined {
  return KNOWN_PATHS.find(([pattern]) => pattern.test(path))?.[1];
}

/** Every error leaves as the spec's envelope: framework errors included, stack traces never. */
export function installErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError | KvbError, request: FastifyRequest, reply: FastifyReply) => {
    if (error instanceof KvbError) {
      return sendError(reply, error.kind, error.detail, (error as KvbError & { allow?: string[] }).allow, error.headers);
    }
    // Checked before storage errors: Node's `aborted` carries ECONNRESET, which means storage there.
    if (isClientAbort(error) || (request.raw.readableAborted && !request.raw.complete)) {
      request.log.debug('client closed the connection before its request body arrived');
      return sendError(reply, 'bad_request', 'request body was cut short');
    }
    const full = storageFullReason(error);
    if (full !== undefined) {
      request.log.warn(`write refused: ${full}`);
      return sendError(reply, 'insufficient_storage', full);
    }
    if (isStorageUnavailable(error)) {
      request.log.error({ err: error }, 'storage unavailable');
      // A lost COMMIT answer is said plainly: the client must check before repeating a non-idempotent write.
      const detail =
        error instanceof StorageUnavailableError && error.outcomeUnknown
          ? 'storage is unavailable: the connection was lost while committing, so the write may or may not have been applied'
          : 'storage is unavailable';
      // Storage outages (a database failover included) last seconds: tell clients and load balancers when to retry.
      return sendError(reply, STORAGE_FAILURES.KVB_STORAGE_UNAVAILABLE.kind, detail, undefined, {
        'retry-after': STORAGE_RETRY_AFTER_SECONDS,
      });
    }
    if ('validation' in error && error.validation) return sendError(reply, 'bad_request', error.message);
    const status = typeof error.statusCode === 'number' ? error.statusCode : 500;
    if (status >= 500) {
      request.log.error({ err: error }, 'unexpected error');
      return sendError(reply, messageForStatus(status), 'internal error');
    }
    // Fastify's own 4xx (413 body too large, 415 media type, 400 bad JSON) become 400 in the envelope.
    return sendError(reply, messageForStatus(status), error.message);
  });

  app.setNotFoundHandler((request, reply) => {
    const path = rawPath(request);
    const allow = allowedMethods(path);
    if (allow && !allow.includes(request.method)) {
      return sendError(reply, 'method_not_allowed', `${request.method} is not allowed here`, allow);
    }
    return sendError(reply, 'not_found', 'no such route');
  });
}
