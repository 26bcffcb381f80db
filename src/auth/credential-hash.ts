import { createHash, randomBytes, scrypt, timingSafeEqual } from 'node:crypto';

// User-chosen keys can be weak, so they get a slow, salted hash. Requests stay fast because the
// server caches verification results per bucket (see server/bucket-cache.ts).
const N = 16384;
const R = 8;
const P = 1;
const KEY_LENGTH = 32;

function derive(secret: string, salt: Buffer, n: number, r: number, p: number): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    scrypt(secret, salt, KEY_LENGTH, { N: n, r, p, maxmem: 64 * 1024 * 1024 }, (err, key) =>
      err ? reject(err) : resolve(key),
    ),
  );
}

/** `scrypt$N$r$p$salt$hash` with base64 salt and hash. */
export async function hashCredential(secret: string): Promise<string> {
  const salt = randomBytes(16);
  const hash = await derive(secret, salt, N, R, P);
  return ['scrypt', N, R, P, salt.toString('base64'), hash.toString('base64')].join('$');
}

/** Constant-time check of a presented credential against a stored hash. */
export async function verifyCredential(secret: string, stored: string): Promise<boolean> {
  const [scheme, n, r, p, salt, hash] = stored.split('$');
  if (scheme !== 'scrypt' || !n || !r || !p || !salt || !hash) return false;
  const expected = Buffer.from(hash, 'base64');
  const actual = await derive(secret, Buffer.from(salt, 'base64'), Number(n), Number(r), Number(p));
  return actual.length === expected.length && timingSafeEqual(actual, expected);
}

/** A fast digest used only as a cache key for verification results, never stored. */
export function credentialDigest(secret: string): string {
  return createHash('sha256').update(secret).digest('base64');
}
