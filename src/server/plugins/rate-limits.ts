import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { credentialDigest } from '../../auth/credential-hash.js';
import { KvbError } from '../../errors.js';
import { presentedCredential } from '../access-control.js';
import { clientAddress } from '../client-address.js';
import { rawPath } from '../request-input.js';
import type { RateLimit, ServerConfig } from '../server-config.js';

/** Health, readiness and metrics stay reachable for the monitoring that watches a busy server. */
const UNLIMITED_PATHS = new Set(['/health', '/ready', '/metrics']);

/** Per credential (its digest, never the credential itself), per client address when anonymous. */
function requesterKey(request: FastifyRequest): string {
  let credential: string | undefined;
  try {
    credential = presentedCredential(request);
  } catch {
    credential = undefined; // a malformed Authorization header counts against its address
  }
  return credential === undefined ? `ip:${clientAddress(request) ?? 'unknown'}` : `credential:${credentialDigest(credential)}`;
}

const tooManyRequests = (retryAfterSeconds: number) =>
  new KvbError('too_many_requests', `rate limit exceeded; retry in ${retryAfterSeconds} s`);

/** The IETF draft's headers (draft-ietf-httpapi-ratelimit-headers): the policy, and what is left of it. */
function draftHeaders(reply: FastifyReply, limit: RateLimit, remaining: number, resetSeconds: number): void {
  reply.header('ratelimit-policy', `"kvb";q=${limit.max};w=${Math.ceil(limit.windowMs / 1000)}`);
  reply.header('ratelimit', `"kvb";r=${remaining};t=${resetSeconds}`);
}

/** Throws 429 (with Retry-After and the rate headers) when a bucket creation is over its limit. */
export type CreationLimiter = (request: FastifyRequest, reply: FastifyReply) => Promise<void>;

/**
 * `--rate-limit` and `--bucket-creation-rate`, both off by default, counted by @fastify/rate-limit
 * in this process's memory (a bounded LRU of requesters): several instances each count on their own.
 * Returns the bucket-creation limiter, if one is configured.
 */
export async function setupRateLimits(app: FastifyInstance, config: ServerConfig): Promise<CreationLimiter | undefined> {
  const { rateLimit: requests, bucketCreationRate: creations } = config;
  if (!requests && !creations) return undefined;
  // Loaded only when a limit is on: nothing to pay at start-up otherwise.
  const { default: rateLimit } = await import('@fastify/rate-limit');
  await app.register(rateLimit, {
    global: requests !== undefined,
    hook: 'onRequest',
    max: requests?.max ?? 1,
    timeWindow: requests?.windowMs ?? 1000,
    keyGenerator: requesterKey,
    allowList: (request) => UNLIMITED_PATHS.has(rawPath(request)),
    errorResponseBuilder: (_request, context) => tooManyRequests(Math.ceil(context.ttl / 1000)),
  });
  if (requests) {
    // The plugin sets the X-RateLimit-* headers (those of the hosted service); these follow them.
    // A callback hook, not an async one: no promise per request.
    app.addHook('onSend', (_request, reply, payload, done) => {
      const remaining = reply.getHeader('x-ratelimit-remaining');
      const reset = reply.getHeader('x-ratelimit-reset');
      if (remaining !== undefined && reset !== undefined) draftHeaders(reply, requests, Number(remaining), Number(reset));
      done(null, payload);
    });
  }
  if (!creations) return undefined;
  const check = app.createRateLimit({
    max: creations.max,
    timeWindow: creations.windowMs,
    keyGenerator: (request) => `create:${clientAddress(request) ?? 'unknown'}`,
  });
  return async (request, reply) => {
    const result = await check(request);
    if (result.isAllowed) return;
    const remaining = Math.max(0, result.remaining);
    draftHeaders(reply, creations, remaining, result.ttlInSeconds);
    if (!result.isExceeded) return;
    reply.header('retry-after', result.ttlInSeconds);
    throw tooManyRequests(result.ttlInSeconds);
  };
}
