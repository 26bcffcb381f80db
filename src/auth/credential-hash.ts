import { createHash, randomBytes, scrypt, timingSafeEqual } from 'node:crypto';

// User-chosen keys can be weak, so they get a slow, salted hash. Requests stay fast because the
// server caches verification results per bucket (see server/bucket-cache.ts).
const N = 16384;
const R = 8;
const P = 1;
const KEY_LENGTH = 32;

/** A bucket's credentials, in the order of their slots in the shared format. */
export const CREDENTIAL_SLOTS = ['admin', 'read', 'write'] as const;
export type CredentialSlot = (typeof CREDENTIAL_SLOTS)[number];

/**
 * Two stored formats, both base64 salt and hash:
 * - `scrypt$N$r$p$salt$hash` (legacy): a salt per key, so checking one presented credential
 *   against a bucket's three keys costs three scrypt runs;
 * - `scrypt-shared$N$r$p$salt$slot$hash`: the bucket's keys share one salt, and one scrypt run
 *   of KEY_LENGTH x 3 bytes gives every slot's 32 bytes at once (slot i is bytes 32i..32i+32, so
 *   equal keys in two slots still store different hashes). One run per presented credential.
 * Both keep N=16384, r=8, p=1: the same work per guess, done once instead of three times.
 */
const LEGACY = 'scrypt';
const SHARED = 'scrypt-shared';

function derive(secret: string, salt: Buffer, n: number, r: number, p: number, length: number): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    scrypt(secret, salt, length, { N: n, r, p, maxmem: 64 * 1024 * 1024 }, (err, key) => (err ? reject(err) : resolve(key))),
  );
}

interface Parsed {
  /** What one scrypt run is keyed by: parameters and salt. Equal for a bucket's shared hashes. */
  group: string;
  n: number;
  r: number;
  p: number;
  salt: Buffer;
  /** Where the stored hash sits in the derived bytes (0 for the legacy format). */
  slot: number;
  length: number;
  hash: Buffer;
}

function parse(stored: string): Parsed | undefined {
  const parts = stored.split('$');
  const shared = parts[0] === SHARED;
  if (!(shared ? parts.length === 7 : parts[0] === LEGACY && parts.length === 6)) return undefined;
  const [n, r, p] = parts.slice(1, 4).map(Number) as [number, number, number];
  const slot = shared ? Number(parts[5]) : 0;
  const hash = Buffer.from(parts.at(-1)!, 'base64');
  const salt = parts[4]!;
  if (![n, r, p, slot].every(Number.isSafeInteger) || slot < 0 || slot >= CREDENTIAL_SLOTS.length || !salt || hash.length === 0)
    return undefined;
  return {
    group: shared ? `${n}$${r}$${p}$${salt}` : stored,
    n,
    r,
    p,
    salt: Buffer.from(salt, 'base64'),
    slot,
    length: shared ? KEY_LENGTH * CREDENTIAL_SLOTS.length : hash.length,
    hash,
  };
}

/** A fresh bucket salt: what `hashCredential` uses for every key of a bucket set together. */
export const newCredentialSalt = (): string => randomBytes(16).toString('base64');

/**
 * The salt a bucket's new key should use: the one its other (kept) shared-format hashes use, so
 * one scrypt run keeps covering them all; a fresh one when none does (a new bucket, or one whose
 * kept keys are all in the legacy format: those move over as they are set).
 */
export function bucketSalt(keptHashes: ReadonlyArray<string | null>): string {
  for (const stored of keptHashes) {
    const parsed = stored?.startsWith(`${SHARED}$`) ? parse(stored) : undefined;
    if (parsed && parsed.n === N && parsed.r === R && parsed.p === P) return parsed.salt.toString('base64');
  }
  return newCredentialSalt();
}

/** `scrypt-shared$N$r$p$salt$slot$hash` for a key in `slot`, with the bucket's salt. */
export async function hashCredential(secret: string, slot: CredentialSlot, salt: string): Promise<string> {
  const index = CREDENTIAL_SLOTS.indexOf(slot);
  const derived = await derive(secret, Buffer.from(salt, 'base64'), N, R, P, KEY_LENGTH * CREDENTIAL_SLOTS.length);
  const hash = derived.subarray(index * KEY_LENGTH, (index + 1) * KEY_LENGTH);
  return [SHARED, N, R, P, salt, index, hash.toString('base64')].join('$');
}

/**
 * Which of `stored` (a bucket's hashes, null where a key is not set) the presented credential
 * matches, each compared in constant time: one scrypt run per distinct salt, so one for a bucket
 * in the shared format, up to one per key for a legacy one. An unreadable hash matches nothing.
 */
export async function matchCredential(secret: string, stored: ReadonlyArray<string | null>): Promise<boolean[]> {
  const parsed = stored.map((s) => (s ? parse(s) : undefined));
  const matches = parsed.map(() => false);
  // One group after another, not all at once: a guess at a legacy bucket occupies one thread.
  for (const members of saltGroups(parsed)) {
    const first = parsed[members[0]!]!;
    const derived = await derive(secret, first.salt, first.n, first.r, first.p, first.length);
    for (const i of members) {
      const { slot, hash } = parsed[i]!;
      const actual = derived.subarray(slot * KEY_LENGTH, slot * KEY_LENGTH + hash.length);
      matches[i] = actual.length === hash.length && timingSafeEqual(actual, hash);
    }
  }
  return matches;
}

/** Indexes of `parsed` grouped by what one scrypt run covers (parameters and salt). */
function saltGroups(parsed: ReadonlyArray<Parsed | undefined>): number[][] {
  const groups = new Map<string, number[]>();
  for (const [i, p] of parsed.entries()) if (p) groups.set(p.group, [...(groups.get(p.group) ?? []), i]);
  return [...groups.values()];
}

/** How many scrypt runs checking a credential against `stored` takes (what matchCredential does). */
export const scryptRunsFor = (stored: ReadonlyArray<string | null>): number =>
  saltGroups(stored.map((s) => (s ? parse(s) : undefined))).length;

/** Constant-time check of a presented credential against one stored hash (either format). */
export async function verifyCredential(secret: string, stored: string): Promise<boolean> {
  return (await matchCredential(secret, [stored]))[0]!;
}

/** The legacy per-key format, as buckets stored before the shared salt have it (tests, fixtures). */
export async function hashCredentialLegacy(secret: string): Promise<string> {
  const salt = randomBytes(16);
  const hash = await derive(secret, salt, N, R, P, KEY_LENGTH);
  return [LEGACY, N, R, P, salt.toString('base64'), hash.toString('base64')].join('$');
}

/** A fast digest used only as a cache key for verification results, never stored. */
export function credentialDigest(secret: string): string {
  return createHash('sha256').update(secret).digest('base64');
}
