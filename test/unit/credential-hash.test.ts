import { describe, expect, it } from 'vitest';
import {
  bucketSalt,
  hashCredential,
  hashCredentialLegacy,
  matchCredential,
  newCredentialSalt,
  scryptRunsFor,
  verifyCredential,
} from '../../src/auth/credential-hash.js';

describe('credential hashes: one scrypt run per presented credential', () => {
  it("a bucket's keys share one salt: each key matches its own slot only, for one scrypt run", async () => {
    const salt = newCredentialSalt();
    const stored = [
      await hashCredential('admin-key', 'admin', salt),
      await hashCredential('read-key', 'read', salt),
      await hashCredential('write-key', 'write', salt),
    ];
    expect(stored.every((h) => h.startsWith(`scrypt-shared$16384$8$1$${salt}$`))).toBe(true);
    expect(scryptRunsFor(stored)).toBe(1);
    expect(await matchCredential('admin-key', stored)).toEqual([true, false, false]);
    expect(await matchCredential('read-key', stored)).toEqual([false, true, false]);
    expect(await matchCredential('write-key', stored)).toEqual([false, false, true]);
    expect(await matchCredential('a-guess', stored)).toEqual([false, false, false]);
    expect(await matchCredential('read-key', [null, stored[1]!, null])).toEqual([false, true, false]);
  });

  it('the same key in two slots stores two different hashes and matches both', async () => {
    const salt = newCredentialSalt();
    const read = await hashCredential('same', 'read', salt);
    const write = await hashCredential('same', 'write', salt);
    expect(read).not.toBe(write);
    expect(await matchCredential('same', [null, read, write])).toEqual([false, true, true]);
  });

  it('legacy per-key hashes keep working (one run each), also mixed with shared ones', async () => {
    const legacy = [await hashCredentialLegacy('admin-key'), await hashCredentialLegacy('read-key'), null];
    expect(legacy[0]).toMatch(/^scrypt\$16384\$8\$1\$[^$]+\$[^$]+$/);
    expect(scryptRunsFor(legacy)).toBe(2);
    expect(await matchCredential('read-key', legacy)).toEqual([false, true, false]);
    expect(await verifyCredential('admin-key', legacy[0]!)).toBe(true);
    // A legacy bucket whose write key is set now: the new key gets a fresh shared salt.
    const salt = bucketSalt([legacy[0]!, legacy[1]!]);
    const mixed = [legacy[0]!, legacy[1]!, await hashCredential('write-key', 'write', salt)];
    expect(scryptRunsFor(mixed)).toBe(3);
    expect(await matchCredential('write-key', mixed)).toEqual([false, false, true]);
    expect(await matchCredential('admin-key', mixed)).toEqual([true, false, false]);
  });

  it("a key set later joins the salt of the bucket's kept shared hashes", async () => {
    const salt = newCredentialSalt();
    const admin = await hashCredential('admin-key', 'admin', salt);
    expect(bucketSalt([admin, null, null])).toBe(salt);
    expect(bucketSalt([null, null, null])).not.toBe(salt);
    const read = await hashCredential('new-read', 'read', bucketSalt([admin, null, null]));
    expect(scryptRunsFor([admin, read, null])).toBe(1);
  });

  it('a malformed stored hash matches nothing and costs nothing', async () => {
    const broken = ['scrypt$x', 'scrypt-shared$16384$8$1$c2FsdA==$7$aGFzaA==', 'bcrypt$whatever', ''];
    expect(scryptRunsFor(broken)).toBe(0);
    expect(await matchCredential('anything', broken)).toEqual([false, false, false, false]);
  });
});
