import { SignJWT, decodeJwt, decodeProtectedHeader } from 'jose';
import { describe, expect, it } from 'vitest';
import { isTokenId, looksLikeJwt, mintToken, newTokenId, verifyToken } from '../../src/auth/tokens.js';

const key = 'signing-key-for-tests';
const claims = { bucket: 'b1', prefix: 'user/', permissions: ['read' as const], generation: 3 };

describe('temporary tokens', () => {
  it('are HS256 JWTs carrying bucket, prefix, permissions, generation, iat and exp', async () => {
    const token = await mintToken(key, claims, 60, 1_700_000_000);
    expect(decodeProtectedHeader(token).alg).toBe('HS256');
    expect(decodeJwt(token)).toEqual({ bkt: 'b1', pfx: 'user/', perm: ['read'], gen: 3, iat: 1_700_000_000, exp: 1_700_000_060 });
    expect(looksLikeJwt(token)).toBe(true);
  });
  it('carry an id (jti) that verification returns; a token minted without one verifies without one', async () => {
    const id = newTokenId();
    expect(isTokenId(id)).toBe(true);
    expect(newTokenId()).not.toBe(id);
    const token = await mintToken(key, { ...claims, id }, 60);
    expect(decodeJwt(token).jti).toBe(id);
    expect((await verifyToken(token, key))?.jti).toBe(id);
    const older = await verifyToken(await mintToken(key, claims, 60), key);
    expect(older).toBeDefined();
    expect(older).not.toHaveProperty('jti');
  });
  it('verify with the right key and fail with another', async () => {
    const token = await mintToken(key, claims, 60);
    expect(await verifyToken(token, key)).toMatchObject({ bkt: 'b1', pfx: 'user/', gen: 3 });
    expect(await verifyToken(token, 'another key')).toBeUndefined();
  });
  it('refuse expired tokens', async () => {
    const token = await mintToken(key, claims, 1, Math.floor(Date.now() / 1000) - 10);
    expect(await verifyToken(token, key)).toBeUndefined();
    // Asked for, an expired token's genuine claims come back (to say when it expired); a forged one's never.
    expect(await verifyToken(token, key, { expired: true })).toMatchObject({
      bkt: 'b1',
      pfx: 'user/',
      exp: Math.floor(Date.now() / 1000) - 9,
    });
    expect(await verifyToken(token, 'another key', { expired: true })).toBeUndefined();
  });
  it('are checked at the time given (the server’s clock): expired from exp on, and not issued more than a minute ahead', async () => {
    const token = await mintToken(key, claims, 60, 1_700_000_000);
    expect(await verifyToken(token, key, { now: 1_700_000_059_999 })).toMatchObject({ exp: 1_700_000_060 });
    expect(await verifyToken(token, key, { now: 1_700_000_060_000 })).toBeUndefined();
    expect(await verifyToken(token, key, { now: 1_700_000_060_000, expired: true })).toMatchObject({ exp: 1_700_000_060 });
    expect(await verifyToken(token, key, { now: 1_699_999_939_999 })).toBeUndefined();
  });
  it('refuse alg none and other algorithms', async () => {
    const good = decodeJwt(await mintToken(key, claims, 60));
    const b64 = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
    expect(await verifyToken(`${b64({ alg: 'none' })}.${b64(good)}.`, key)).toBeUndefined();
    const hs512 = await new SignJWT(good).setProtectedHeader({ alg: 'HS512' }).sign(new TextEncoder().encode(key));
    expect(await verifyToken(hs512, key)).toBeUndefined();
  });
  it('refuse a tampered payload', async () => {
    const [h, , s] = (await mintToken(key, claims, 60)).split('.');
    const payload = Buffer.from(JSON.stringify({ ...claims, pfx: '' })).toString('base64url');
    expect(await verifyToken(`${h}.${payload}.${s}`, key)).toBeUndefined();
  });
  it('refuse tokens with missing or malformed claims', async () => {
    const noPrefix = await new SignJWT({ bkt: 'b1', perm: ['read'], gen: 0 })
      .setProtectedHeader({ alg: 'HS256' })
      .setIssuedAt()
      .setExpirationTime('1m')
      .sign(new TextEncoder().encode(key));
    expect(await verifyToken(noPrefix, key)).toBeUndefined();
  });
});
