import { isIP } from 'node:net';
import type { FastifyInstance, FastifyRequest } from 'fastify';

/**
 * An address as it may be recorded: an IPv4 or IPv6 address (a short zone id allowed). With
 * `--trust-proxy`, X-Forwarded-For is whatever the proxy passed on, so its text is taken only
 * when it parses as an address; anything else (a name, markup, 4 KB) is no address at all.
 */
const ADDRESS_TEXT = /^[0-9A-Za-z:.%_-]{2,64}$/;

export function parsedAddress(text: string | undefined): string | undefined {
  return text !== undefined && ADDRESS_TEXT.test(text) && isIP(text) !== 0 ? text : undefined;
}

/**
 * The client's address read from the request (through Fastify's `request.ip`, so `--trust-proxy`
 * applies), or undefined once the connection is gone: Fastify's getter reads the socket, which a
 * response that closes its connection (an import refused mid-body) has dropped by the time the
 * access log runs, and with `--trust-proxy` the getter then throws.
 */
function readAddress(request: FastifyRequest): string | undefined {
  if (!request.raw.socket) return undefined;
  try {
    return parsedAddress(request.ip);
  } catch {
    return undefined;
  }
}

/** Not read yet (a request refused before the hooks ran, such as a malformed URL). */
const UNREAD = false;

/** Every request gets its address slot; `noteClientAddress` fills it while the socket is there. */
export function decorateClientAddress(app: FastifyInstance): void {
  app.decorateRequest('kvbClientAddress', UNREAD);
}

/** Reads the address once, at the start of the request (the first hook), while the socket exists. */
export function noteClientAddress(request: FastifyRequest): void {
  request.kvbClientAddress = readAddress(request) ?? null;
}

/**
 * The client's address as every part of the server uses it (the access log, the per-address
 * limits, history's `actor.address`): a parsed IP address, or undefined. Never throws.
 */
export function clientAddress(request: FastifyRequest): string | undefined {
  const noted = request.kvbClientAddress;
  if (noted === UNREAD || noted === undefined) noteClientAddress(request);
  return request.kvbClientAddress || undefined;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** See clientAddress: the address, null when there is none, false before it is read. */
    kvbClientAddress: string | null | false;
  }
}
