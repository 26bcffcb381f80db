import type { FastifyRequest } from 'fastify';
import { type KeyRole, type Operation, type Principal, allows } from '../auth/access.js';
import { credentialDigest, verifyCredential } from '../auth/credential-hash.js';
import { looksLikeJwt, verifyToken } from '../auth/tokens.js';
import { KvbError } from '../errors.js';
import { type BucketCache, type CachedBucket, MAX_VERIFICATIONS } from './bucket-cache.js';
import { queryOf, singleParam } from './request-input.js';

const unauthorized = (detail: string) => new KvbError('unauthorized', detail);

/**
 * The credential a request presents, looked up in the spec's order: Bearer, Basic (username),
 * `access_token` query, `key` query. The first present source is the only one used.
 */
export function presentedCredential(request: FastifyRequest): string | undefined {
  const header = request.headers.authorization;
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
  const query = queryOf(request);
  return singleParam(query, 'access_token') || singleParam(query, 'key') || undefined;
}

function remember<V>(map: Map<string, V>, key: string, value: V): V {
  if (map.size >= MAX_VERIFICATIONS) map.clear();
  map.set(key, value);
  return value;
}

async function keyRoles(bucket: CachedBucket, credential: string): Promise<ReadonlySet<KeyRole>> {
  const digest = credentialDigest(credential);
  const known = bucket.keyRoles.get(digest);
  if (known) return known;
  const { secretKeyHash, readKeyHash, writeKeyHash } = bucket.record;
  const checks: Array<[KeyRole, string | null]> = [
    ['admin', secretKeyHash],
    ['read', readKeyHash],
    ['write', writeKeyHash],
  ];
  const matched = await Promise.all(checks.map(([, hash]) => (hash ? verifyCredential(credential, hash) : false)));
  const roles = new Set(checks.filter((_, i) => matched[i]).map(([role]) => role));
  return remember(bucket.keyRoles, digest, roles);
}

async function tokenPrincipal(bucket: CachedBucket, token: string): Promise<Principal | undefined> {
  const { signingKey, signingKeyGeneration, id } = bucket.record;
  if (!signingKey) return undefined;
  let claims = bucket.tokens.get(token);
  if (claims === undefined) claims = remember(bucket.tokens, token, (await verifyToken(token, signingKey)) ?? null);
  if (!claims || claims.bkt !== id || claims.gen !== signingKeyGeneration) return undefined;
  if (claims.exp * 1000 <= Date.now()) return undefined;
  return { kind: 'token', prefix: claims.pfx, permissions: new Set(claims.perm) };
}

/** Who is calling: anonymous, a key with its roles, or a token. An unrecognised credential is a 401. */
export async function principalFor(bucket: CachedBucket, request: FastifyRequest): Promise<Principal> {
  const credential = presentedCredential(request);
  if (credential === undefined) return { kind: 'anonymous' };
  if (looksLikeJwt(credential)) {
    const token = await tokenPrincipal(bucket, credential);
    if (token) return token;
  }
  const roles = await keyRoles(bucket, credential);
  if (roles.size > 0) return { kind: 'key', roles };
  throw unauthorized('credential is not valid for this bucket');
}

/** Throws 401 for an anonymous caller and 403 for an identified one when `op` is not allowed. */
export function authorize(bucket: CachedBucket, principal: Principal, op: Operation, key?: string): void {
  if (allows(principal, op, bucket.flags, key)) return;
  if (principal.kind === 'anonymous') throw unauthorized(`this bucket needs a credential to ${op.replace('_', ' ')}`);
  if (principal.kind === 'token' && key !== undefined && !key.startsWith(principal.prefix)) {
    throw new KvbError('forbidden', "key is outside the token's prefix");
  }
  throw new KvbError('forbidden', `credential does not allow ${op.replace('_', ' ')}`);
}

/** Looks up a bucket (404 when absent) and the caller's principal for it. */
export async function openBucket(
  buckets: BucketCache,
  id: string,
  request: FastifyRequest,
): Promise<{ bucket: CachedBucket; principal: Principal }> {
  const bucket = await buckets.get(id);
  if (!bucket) throw new KvbError('not_found', 'no such bucket');
  return { bucket, principal: await principalFor(bucket, request) };
}
