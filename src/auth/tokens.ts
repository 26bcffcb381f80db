import { hkdfSync, randomBytes } from 'node:crypto';
import { SignJWT, errors, jwtVerify } from 'jose';
import { PERMISSIONS, type Permission } from '../limits.js';

/** The claims kvb puts in a temporary token (besides iat and exp). */
export interface TokenClaims {
  bkt: string;
  pfx: string;
  perm: Permission[];
  gen: number;
  exp: number;
  /** The token's id (`jti`): names it in history without revealing it. Absent in tokens minted before kvb gave ids. */
  jti?: string;
}

/** A token id: 12 random base64url characters (72 bits), nothing derived from the token or a key. */
export const newTokenId = () => randomBytes(9).toString('base64url');

const TOKEN_ID = /^[A-Za-z0-9_-]{1,64}$/;

/** Whether a string has the shape of a token id (`kvb mint-token` prints them; history filters by them). */
export const isTokenId = (id: string) => TOKEN_ID.test(id);

const ALGORITHM = 'HS256';
const encoder = new TextEncoder();

/**
 * The HMAC key tokens are signed with: HKDF-SHA256 of the bucket's signing key and its random
 * salt. The salt never leaves the server, so a token gives nothing to test guesses of a short
 * signing key against. No salt (a bucket from an older version) falls back to the signing key.
 */
export function tokenKey(signingKey: string, salt: string | null): Uint8Array {
  if (salt === null) return encoder.encode(signingKey);
  return new Uint8Array(hkdfSync('sha256', signingKey, salt, 'kvb token signing key v1', 32));
}

const keyBytes = (key: string | Uint8Array) => (typeof key === 'string' ? encoder.encode(key) : key);

export async function mintToken(
  signingKey: string | Uint8Array,
  claims: { bucket: string; prefix: string; permissions: Permission[]; generation: number; id?: string },
  ttlSeconds: number,
  nowSeconds = Math.floor(Date.now() / 1000),
): Promise<string> {
  const token = new SignJWT({ bkt: claims.bucket, pfx: claims.prefix, perm: claims.permissions, gen: claims.generation });
  if (claims.id !== undefined) token.setJti(claims.id);
  return token
    .setProtectedHeader({ alg: ALGORITHM, typ: 'JWT' })
    .setIssuedAt(nowSeconds)
    .setExpirationTime(nowSeconds + ttlSeconds)
    .sign(keyBytes(signingKey));
}

/** A JWT is three base64url parts; anything else is never treated as a token. */
export function looksLikeJwt(credential: string): boolean {
  return /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/.test(credential);
}

/**
 * Verifies signature (HS256 only), expiry, not-before and the claim shapes. Returns the claims
 * or undefined. Whether the token belongs to this bucket and generation is checked by the caller.
 * `now` (ms) is the time it is checked at: the server's clock.
 */
export async function verifyToken(
  token: string,
  signingKey: string | Uint8Array,
  options: { expired?: boolean; now?: number } = {},
): Promise<TokenClaims | undefined> {
  const now = options.now ?? Date.now();
  let payload: Record<string, unknown>;
  try {
    payload = (
      await jwtVerify(token, keyBytes(signingKey), { algorithms: [ALGORITHM], requiredClaims: ['exp', 'iat'], currentDate: new Date(now) })
    ).payload;
  } catch (err) {
    // jose checks the signature before the claims: an expired token's payload is genuine, and with
    // `expired` the caller gets it to say when it expired (it still checks exp before trusting it).
    if (!options.expired || !(err instanceof errors.JWTExpired)) return undefined;
    payload = err.payload;
  }
  const { bkt, pfx, perm, gen, exp, iat, jti } = payload;
  if (typeof bkt !== 'string' || typeof pfx !== 'string' || pfx.length === 0) return undefined;
  if (typeof gen !== 'number' || typeof exp !== 'number' || typeof iat !== 'number') return undefined;
  if (!Array.isArray(perm) || !perm.every((p) => (PERMISSIONS as readonly unknown[]).includes(p))) return undefined;
  // A token issued in the future was not made by this server's clock.
  if (iat > now / 1000 + 60) return undefined;
  // A jti kvb did not make (a signed token never has one) is no reason to refuse the token: it is not recorded.
  return { bkt, pfx, perm: perm as Permission[], gen, exp, ...(typeof jti === 'string' && isTokenId(jti) && { jti }) };
}
