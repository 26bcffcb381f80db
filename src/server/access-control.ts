import type { FastifyRequest } from 'fastify';
import { type KeyRole, type Operation, type Principal, allows } from '../auth/access.js';
import { credentialDigest, matchCredential } from '../auth/credential-hash.js';
import { type TokenClaims, looksLikeJwt, tokenKey, verifyToken } from '../auth/tokens.js';
import { KvbError } from '../errors.js';
import type { Actor } from '../store/history-types.js';
import { type BucketCache, type CachedBucket, MAX_VERIFICATIONS, type Verifying } from './bucket-cache.js';
import type { Clock } from './clock.js';
import { clientAddress } from './client-address.js';
import { type Query, queryOf, singleParam } from './request-input.js';

const unauthorized = (detail: string) => new KvbError('unauthorized', detail);

/**
 * The credential a request presents, looked up in the spec's order: Bearer, Basic (username),
 * `access_token` query, `key` query. The first present source is the only one used.
 */
export function presentedCredential(request: FastifyRequest): string | undefined {
  return credentialIn(request.headers.authorization, queryOf(request));
}

/** presentedCredential from the request's Authorization header and parsed query. */
export function credentialIn(header: string | undefined, query: Query): string | undefined {
  if (header !== undefined) {
    const match = /^([A-Za-z]+)[ \t]+(\S.*)$/.exec(header.trim());
    const scheme = match?.[1]?.toLowerCase();
    const value = match?.[2]?.trim();
    if (!value) throw unauthorized('malformed Authorization header');
    if (scheme === 'bearer') return value;
    if (scheme === 'basic') {
      if (!/^[A-Za-z0-9+/]+={0,2}$/.test(value)) throw unauthorized('malformed Basic credentials');
      const decoded = Buffer.from(value, 'base64').toString('utf8');
      const colon = decoded.indexOf(':');
      const username = colon === -1 ? decoded : decoded.slice(0, colon);
      if (!username) throw unauthorized('Basic credentials have an empty username');
      return username;
    }
    throw unauthorized('unsupported Authorization scheme (use Bearer or Basic)');
  }
  return singleParam(query, 'access_token') || singleParam(query, 'key') || undefined;
}

function remember<V>(map: Map<string, V>, key: string, value: V): V {
  if (map.size >= MAX_VERIFICATIONS) map.clear();
  map.set(key, value);
  return value;
}

const ROLE_OF_SLOT: KeyRole[] = ['admin', 'read', 'write'];

async function verifyRoles(
  buckets: BucketCache,
  bucket: CachedBucket,
  credential: string,
  source: string,
  waiters: Verifying['waiters'],
): Promise<ReadonlySet<KeyRole>> {
  const { secretKeyHash, readKeyHash, writeKeyHash } = bucket.record;
  const scheduled = await buckets.verifications.run(
    source,
    // One scrypt run for a bucket whose keys share a salt (up to three for a legacy one).
    async () => matchCredential(credential, [secretKeyHash, readKeyHash, writeKeyHash]),
    () => [...waiters].every((socket) => !socket || socket.destroyed),
  );
  if (!scheduled.ran) {
    const from = scheduled.reason === 'source' ? ' from this address' : '';
    throw new KvbError('too_many_requests', `too many unverified credentials${from} at once; retry shortly`, {
      'retry-after': String(scheduled.retryAfterSeconds),
    });
  }
  return new Set(ROLE_OF_SLOT.filter((_, i) => scheduled.value[i]));
}

async function keyRoles(
  buckets: BucketCache,
  bucket: CachedBucket,
  credential: string,
  request: FastifyRequest,
): Promise<ReadonlySet<KeyRole>> {
  const digest = credentialDigest(credential);
  const known = bucket.keyRoles.get(digest) ?? bucket.wrongCredentials.get(digest);
  if (known) return known;
  const pending = bucket.verifying;
  let verifying = pending.get(digest);
  if (!verifying) {
    const waiters: Verifying['waiters'] = new Set();
    verifying = {
      waiters,
      result: verifyRoles(buckets, bucket, credential, clientAddress(request) ?? 'unknown', waiters).finally(() => pending.delete(digest)),
    };
    pending.set(digest, verifying);
  }
  verifying.waiters.add(request.raw.socket);
  const roles = await verifying.result;
  // Wrong ones apart, so a flood of guesses cannot push the known-good credentials out.
  return remember(roles.size > 0 ? bucket.keyRoles : bucket.wrongCredentials, digest, roles);
}

/** The principal a token's verified claims give at `now` (undefined: not valid here, or expired). */
function tokenFromClaims(bucket: CachedBucket, claims: TokenClaims | null, now: number): Principal | undefined {
  if (!claims || claims.bkt !== bucket.record.id || claims.gen !== bucket.record.signingKeyGeneration) return undefined;
  if (claims.exp * 1000 <= now) return undefined;
  return {
    kind: 'token',
    prefix: claims.pfx,
    permissions: new Set(claims.perm),
    expiresAt: claims.exp * 1000,
    ...(claims.jti !== undefined && { id: claims.jti }),
  };
}

/**
 * Why a genuine token of this bucket is refused, in words the holder can act on (undefined: not
 * one of this bucket's tokens, so it is tried as a key).
 */
function tokenRefusal(bucket: CachedBucket, claims: TokenClaims | null | undefined, now: number): string | undefined {
  if (!claims || claims.bkt !== bucket.record.id) return undefined;
  if (claims.gen !== bucket.record.signingKeyGeneration)
    return 'token was signed with an earlier signing key (rotated since): mint a new one';
  if (claims.exp * 1000 <= now) return `token expired at ${new Date(claims.exp * 1000).toISOString()}`;
  return undefined;
}

async function tokenPrincipal(bucket: CachedBucket, token: string, now: number): Promise<Principal | undefined> {
  const { signingKey, tokenSalt } = bucket.record;
  if (!signingKey) return undefined;
  let claims = bucket.tokens.get(token);
  if (claims === undefined)
    claims = remember(bucket.tokens, token, (await verifyToken(token, tokenKey(signingKey, tokenSalt), { expired: true, now })) ?? null);
  const principal = tokenFromClaims(bucket, claims, now);
  const refused = principal ? undefined : tokenRefusal(bucket, claims, now);
  if (refused) throw unauthorized(refused);
  return principal;
}

/**
 * Who is calling: anonymous, a key with its roles, or a token. An unrecognised credential is a 401.
 * A credential not seen yet is verified in `buckets`' slow-hash queue.
 */
export async function principalFor(buckets: BucketCache, bucket: CachedBucket, request: FastifyRequest): Promise<Principal> {
  const credential = presentedCredential(request);
  if (credential === undefined) return { kind: 'anonymous' };
  if (looksLikeJwt(credential)) {
    const token = await tokenPrincipal(bucket, credential, buckets.clock());
    if (token) return token;
  }
  const roles = await keyRoles(buckets, bucket, credential, request);
  if (roles.size > 0) return { kind: 'key', roles };
  throw unauthorized('credential is not valid for this bucket');
}

/**
 * principalFor without waiting, from what the bucket cache already knows: undefined when a
 * credential or token still has to be verified (principalFor then does it).
 */
function knownPrincipal(bucket: CachedBucket, authorization: string | undefined, query: Query, clock: Clock): Principal | undefined {
  const credential = credentialIn(authorization, query);
  if (credential === undefined) return { kind: 'anonymous' };
  if (looksLikeJwt(credential) && bucket.record.signingKey) {
    const claims = bucket.tokens.get(credential);
    if (claims === undefined) return undefined;
    const now = clock();
    const token = tokenFromClaims(bucket, claims, now);
    if (token) return token;
    const refused = tokenRefusal(bucket, claims, now);
    if (refused) throw unauthorized(refused);
  }
  const digest = credentialDigest(credential);
  const roles = bucket.keyRoles.get(digest) ?? bucket.wrongCredentials.get(digest);
  if (roles === undefined) return undefined;
  if (roles.size > 0) return { kind: 'key', roles };
  throw unauthorized('credential is not valid for this bucket');
}

/**
 * Who makes a write, as history records it: the credential's kind (a key by its strongest role),
 * a token's id, and the client address (client-address.ts: a parsed IP address or none).
 */
export function actorOf(principal: Principal, request: FastifyRequest): Actor {
  return actorFor(principal, clientAddress(request));
}

/** actorOf for a request known by its client address alone (the write lane's, write-lane.ts). */
export function actorFor(principal: Principal, address: string | undefined): Actor {
  switch (principal.kind) {
    case 'anonymous':
      return { kind: 'anonymous', address };
    case 'token':
      return { kind: 'token', tokenId: principal.id, address };
    case 'key':
      return { kind: principal.roles.has('admin') ? 'secret' : principal.roles.has('write') ? 'write' : 'read', address };
  }
}

/** Throws 401 for an anonymous caller and 403 for an identified one when `op` is not allowed. */
export function authorize(bucket: CachedBucket, principal: Principal, op: Operation, key?: string): void {
  if (allows(principal, op, bucket.flags, key)) return;
  if (principal.kind === 'anonymous') throw unauthorized(`this bucket needs a credential to ${op.replace('_', ' ')}`);
  if (principal.kind === 'token' && key !== undefined && !key.startsWith(principal.prefix)) {
    throw new KvbError('forbidden', `key ${JSON.stringify(key)} is outside the token's prefix ${JSON.stringify(principal.prefix)}`);
  }
  throw new KvbError('forbidden', `credential does not allow ${op.replace('_', ' ')}`);
}

/**
 * openBucket when the bucket and the caller's verification are both cached, without a promise
 * (the hot path); undefined when openBucket has work to wait for. Takes the request's
 * Authorization header and query, so the fast lane (fast-lane.ts) can call it before Fastify
 * has made a request object.
 */
export function openBucketNow(
  buckets: BucketCache,
  id: string,
  authorization: string | undefined,
  query: Query,
): { bucket: CachedBucket; principal: Principal } | undefined {
  const bucket = buckets.peek(id);
  if (!bucket) return undefined;
  const principal = knownPrincipal(bucket, authorization, query, buckets.clock);
  return principal && { bucket, principal };
}

/** Looks up a bucket (404 when absent) and the caller's principal for it. */
export async function openBucket(
  buckets: BucketCache,
  id: string,
  request: FastifyRequest,
): Promise<{ bucket: CachedBucket; principal: Principal }> {
  const bucket = await buckets.get(id);
  if (!bucket) throw new KvbError('not_found', 'no such bucket');
  return { bucket, principal: await principalFor(buckets, bucket, request) };
}
