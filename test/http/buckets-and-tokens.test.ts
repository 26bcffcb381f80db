import { SignJWT, decodeJwt, decodeProtectedHeader } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, createBucket, expectError, json } from '../helpers/http.js';
import { type AppServer, startAppServer } from '../helpers/app-server.js';
import { testClock } from '../helpers/test-clock.js';

let server: AppServer;
// The server's time: a token expires when a test moves it on.
const clock = testClock();
beforeAll(async () => {
  server = await startAppServer({ clock: clock.now });
});
afterAll(async () => {
  await server.stop();
});

const admin = (secret: string) => ({ authorization: `Bearer ${secret}` });
const create = (fields: Record<string, string>, headers: Record<string, string> = {}) =>
  call(`${server.api}/`, { method: 'POST', body: new URLSearchParams(fields), headers });

describe('Create bucket', () => {
  it('answers 201 text/plain with the id alone and a Location', async () => {
    const res = await create({ email: 'a@example.com' });
    expect(res.status).toBe(201);
    expect(res.headers.get('content-type')).toBe('text/plain; charset=utf-8');
    expect(res.text).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(res.headers.get('location')).toBe(`/api/v1/${res.text}`);
  });
  it('ids are unguessable: 50 ids are distinct random UUIDv4s', async () => {
    const ids = await Promise.all(Array.from({ length: 50 }, async () => (await create({ email: 'a@b' })).text));
    expect(new Set(ids).size).toBe(50);
  });
  it.each([
    ['no email', {}],
    ['an email without @', { email: 'nobody' }],
    ['an unknown field', { email: 'a@b', colour: 'red' }],
    ['a bad default_ttl', { email: 'a@b', default_ttl: '-1' }],
    ['a repeated field', 'email=a@b&email=c@d'],
  ])('%s is 400', async (_name, fields) => {
    const body = typeof fields === 'string' ? fields : new URLSearchParams(fields as Record<string, string>).toString();
    expectError(
      await call(`${server.api}/`, { method: 'POST', body, headers: { 'content-type': 'application/x-www-form-urlencoded' } }),
      400,
      'bad_request',
    );
  });
  it('a JSON body is 400: creation takes a form', async () => {
    expectError(await call(`${server.api}/`, { method: 'POST', ...json({ email: 'a@b' }) }), 400, 'bad_request');
  });
  it('default_ttl: omitted is 604800, 0 is kept, empty optional fields count as absent', async () => {
    const a = await createBucket(server.api, { secret_key: 's' });
    expect((await call(`${server.api}/${a}`, { headers: admin('s') })).json()).toMatchObject({ default_ttl: 604800 });
    const b = await createBucket(server.api, { secret_key: 's', default_ttl: '0', read_key: '' });
    expect((await call(`${server.api}/${b}`, { headers: admin('s') })).json()).toMatchObject({ default_ttl: 0, has_read_key: false });
  });
});

describe('Bucket policy: GET, HEAD, PATCH, DELETE', () => {
  it('GET shows the projection and never a secret or a hash', async () => {
    const id = await createBucket(server.api, { secret_key: 'S3cretValue', read_key: 'R3adValue', signing_key: 'S1gnValue' });
    const res = await call(`${server.api}/${id}`, { headers: admin('S3cretValue') });
    expect(res.status).toBe(200);
    expect(res.json()).toEqual({
      default_ttl: 604800,
      has_secret_key: true,
      has_read_key: true,
      has_write_key: false,
      has_signing_key: true,
      signing_key_generation: 0,
      anonymous_access: { read: false, write: true, enumerate: false, delete: true },
    });
    for (const secret of ['S3cretValue', 'R3adValue', 'S1gnValue', 'scrypt']) expect(res.text).not.toContain(secret);
  });
  it('HEAD is 200 with admin access and 404 for everything else', async () => {
    const id = await createBucket(server.api, { secret_key: 's', read_key: 'r' });
    expect((await call(`${server.api}/${id}`, { method: 'HEAD', headers: admin('s') })).status).toBe(200);
    for (const headers of [{}, admin('wrong'), admin('r')]) {
      expect((await call(`${server.api}/${id}`, { method: 'HEAD', headers })).status).toBe(404);
    }
    expect((await call(`${server.api}/00000000-0000-4000-8000-000000000000`, { method: 'HEAD', headers: admin('s') })).status).toBe(404);
  });
  it('PATCH sets and rotates keys, clears with null, and answers 204 with no body', async () => {
    const id = await createBucket(server.api, { secret_key: 's', read_key: 'r' });
    const patch = (body: unknown) => call(`${server.api}/${id}`, { method: 'PATCH', ...json(body, admin('s')) });
    const res = await patch({ write_key: 'w', default_ttl: 60 });
    expect(res.status).toBe(204);
    expect(res.body.length).toBe(0);
    expect((await call(`${server.api}/${id}`, { headers: admin('s') })).json()).toMatchObject({ has_write_key: true, default_ttl: 60 });
    expect((await patch({ read_key: null, default_ttl: null })).status).toBe(204);
    expect((await call(`${server.api}/${id}`, { headers: admin('s') })).json()).toMatchObject({ has_read_key: false, default_ttl: 0 });
    expect((await patch({ secret_key: 12345 })).status).toBe(204);
    expect((await call(`${server.api}/${id}`, { headers: admin('12345') })).status).toBe(200);
    expectError(await call(`${server.api}/${id}`, { headers: admin('s') }), 401, 'unauthorized');
  });
  it.each([
    ['an unknown field', { read_key: 'x', email: 'new@b' }],
    ['clearing secret_key', { secret_key: null }],
    ['a boolean key', { read_key: true }],
    ['an empty key', { write_key: '' }],
    ['a string default_ttl', { default_ttl: '60' }],
    ['a negative default_ttl', { default_ttl: -1 }],
    ['an array body', [1]],
  ])('PATCH with %s is 400 and changes nothing', async (_name, body) => {
    const id = await createBucket(server.api, { secret_key: 's' });
    expectError(await call(`${server.api}/${id}`, { method: 'PATCH', ...json(body, admin('s')) }), 400, 'bad_request');
    expect((await call(`${server.api}/${id}`, { headers: admin('s') })).json()).toMatchObject({
      has_read_key: false,
      has_write_key: false,
      default_ttl: 604800,
    });
  });
  it('PATCH with invalid JSON or another content type is 400', async () => {
    const id = await createBucket(server.api, { secret_key: 's' });
    expectError(
      await call(`${server.api}/${id}`, { method: 'PATCH', headers: { ...admin('s'), 'content-type': 'application/json' }, body: '{' }),
      400,
      'bad_request',
    );
    expectError(
      await call(`${server.api}/${id}`, { method: 'PATCH', headers: { ...admin('s'), 'content-type': 'text/plain' }, body: '{}' }),
      400,
      'bad_request',
    );
  });
  it('signing_key_generation goes up on every set, rotation and clear', async () => {
    const id = await createBucket(server.api, { secret_key: 's', signing_key: 'k1' });
    const generation = async () =>
      ((await call(`${server.api}/${id}`, { headers: admin('s') })).json() as { signing_key_generation: number }).signing_key_generation;
    expect(await generation()).toBe(0);
    await call(`${server.api}/${id}`, { method: 'PATCH', ...json({ signing_key: 'k2' }, admin('s')) });
    expect(await generation()).toBe(1);
    await call(`${server.api}/${id}`, { method: 'PATCH', ...json({ signing_key: null }, admin('s')) });
    expect(await generation()).toBe(2);
  });
  it.each(['', '/'])('DELETE /api/v1/{bucket}%s answers 204 and removes the bucket and its keys', async (slash) => {
    const id = await createBucket(server.api, { secret_key: 's' });
    await call(`${server.api}/${id}/k`, { method: 'POST', body: 'x' });
    const res = await call(`${server.api}/${id}${slash}`, { method: 'DELETE', headers: admin('s') });
    expect(res.status).toBe(204);
    expectError(await call(`${server.api}/${id}/k`), 404, 'not_found');
    expectError(await call(`${server.api}/${id}`, { headers: admin('s') }), 404, 'not_found');
    expectError(await call(`${server.api}/${id}`, { method: 'DELETE', headers: admin('s') }), 404, 'not_found');
  });
});

describe('Temporary tokens', () => {
  let id: string;
  const mint = (fields: Record<string, string> | string, secret = 's') =>
    call(`${server.api}/${id}/tokens/`, {
      method: 'POST',
      headers: { ...admin(secret), 'content-type': 'application/x-www-form-urlencoded' },
      body: typeof fields === 'string' ? fields : new URLSearchParams(fields).toString(),
    });
  const tokenFor = async (fields: Record<string, string>) => ((await mint(fields)).json() as { access_token: string }).access_token;
  beforeAll(async () => {
    id = await createBucket(server.api, { secret_key: 's', read_key: 'r', write_key: 'w', signing_key: 'signing' });
    const seeded = await call(`${server.api}/${id}`, {
      method: 'POST',
      ...json(
        {
          txn: [
            { set: 'user/1', value: 'one' },
            { set: 'user/2', value: 'two' },
            { set: 'other', value: 'secret stuff' },
          ],
        },
        admin('s'),
      ),
    });
    expect(seeded.status).toBe(204);
  });

  it('mints an HS256 JWT with bucket, prefix, permissions, generation, iat and exp', async () => {
    const res = await mint({ prefix: 'user/', permissions: 'read,enumerate', ttl: '60' });
    expect(res.status).toBe(200);
    const token = (res.json() as { access_token: string }).access_token;
    expect(decodeProtectedHeader(token).alg).toBe('HS256');
    const claims = decodeJwt(token);
    expect(claims).toMatchObject({ bkt: id, pfx: 'user/', perm: ['read', 'enumerate'], gen: 0 });
    expect(claims.exp! - claims.iat!).toBe(60);
  });
  it('repeated permissions fields work like a comma list', async () => {
    const token = await tokenFor({ prefix: 'user/', permissions: 'read', ttl: '60' } as Record<string, string>);
    expect(token).toBeTruthy();
    const res = await mint('prefix=user/&permissions=read&permissions=delete&ttl=60');
    expect(decodeJwt((res.json() as { access_token: string }).access_token).perm).toEqual(['read', 'delete']);
  });
  it.each([
    ['an empty prefix', { prefix: '', permissions: 'read', ttl: '60' }],
    ['an unknown permission', { prefix: 'p', permissions: 'read,admin', ttl: '60' }],
    ['ttl 0', { prefix: 'p', permissions: 'read', ttl: '0' }],
    ['a non-integer ttl', { prefix: 'p', permissions: 'read', ttl: '1.5' }],
    ['a missing ttl', { prefix: 'p', permissions: 'read' }],
    ['no permissions', { prefix: 'p', ttl: '60' }],
  ])('%s is 400', async (_name, fields) => {
    expectError(await mint(fields as Record<string, string>), 400, 'bad_request');
  });
  it('needs the admin credential: 401 without, 403 with a read key', async () => {
    expectError(
      await call(`${server.api}/${id}/tokens/`, {
        method: 'POST',
        body: new URLSearchParams({ prefix: 'p', permissions: 'read', ttl: '9' }),
      }),
      401,
      'unauthorized',
    );
    expectError(await mint({ prefix: 'p', permissions: 'read', ttl: '9' }, 'r'), 403, 'forbidden');
  });
  it('a bucket without a signing key answers 503', async () => {
    const plain = await createBucket(server.api, { secret_key: 's' });
    const res = await call(`${server.api}/${plain}/tokens/`, {
      method: 'POST',
      headers: admin('s'),
      body: new URLSearchParams({ prefix: 'p', permissions: 'read', ttl: '9' }),
    });
    expectError(res, 503, 'service_unavailable');
  });
  it('a token has exactly its permissions under its prefix, in every endpoint', async () => {
    const reader = await tokenFor({ prefix: 'user/', permissions: 'read', ttl: '60' });
    const as = { authorization: `Bearer ${reader}` };
    expect((await call(`${server.api}/${id}/user/1`, { headers: as })).text).toBe('one');
    expect((await call(`${server.api}/${id}/user/1`, { method: 'HEAD', headers: as })).status).toBe(200);
    expectError(await call(`${server.api}/${id}/user/9`, { headers: as }), 404, 'not_found');
    expectError(await call(`${server.api}/${id}/other`, { headers: as }), 403, 'forbidden');
    expectError(await call(`${server.api}/${id}/absent-outside`, { headers: as }), 403, 'forbidden');
    expectError(await call(`${server.api}/${id}/user/1`, { method: 'POST', headers: as, body: 'x' }), 403, 'forbidden');
    expectError(await call(`${server.api}/${id}/user/1`, { method: 'PATCH', headers: as, body: '+1' }), 403, 'forbidden');
    expectError(await call(`${server.api}/${id}/user/1`, { method: 'DELETE', headers: as }), 403, 'forbidden');
    expectError(await call(`${server.api}/${id}`, { headers: as }), 403, 'forbidden');
    expect((await call(`${server.api}/${id}/?format=json`, { headers: as })).json()).toEqual(['user/1', 'user/2']);
    expect((await call(`${server.api}/${id}/?format=json&prefix=us`, { headers: as })).json()).toEqual(['user/1', 'user/2']);
    expect((await call(`${server.api}/${id}/?format=json&prefix=user/2`, { headers: as })).json()).toEqual(['user/2']);
    expectError(await call(`${server.api}/${id}/?prefix=oth`, { headers: as }), 403, 'forbidden');
    expect((await call(`${server.api}/${id}/?values=true&format=json`, { headers: as })).json()).toEqual([
      ['user/1', 'one'],
      ['user/2', 'two'],
    ]);
  });
  it('enumerate lists keys but not values; write and delete stay in the prefix, transactions too', async () => {
    const lister = await tokenFor({ prefix: 'user/', permissions: 'enumerate', ttl: '60' });
    expect((await call(`${server.api}/${id}/?format=json`, { headers: { authorization: `Bearer ${lister}` } })).json()).toEqual([
      'user/1',
      'user/2',
    ]);
    expectError(await call(`${server.api}/${id}/?values=true`, { headers: { authorization: `Bearer ${lister}` } }), 403, 'forbidden');
    expectError(await call(`${server.api}/${id}/user/1`, { headers: { authorization: `Bearer ${lister}` } }), 403, 'forbidden');
    const writer = await tokenFor({ prefix: 'user/', permissions: 'write,delete', ttl: '60' });
    const as = { authorization: `Bearer ${writer}` };
    expect((await call(`${server.api}/${id}/user/3`, { method: 'POST', headers: as, body: 'three' })).status).toBe(200);
    expect((await call(`${server.api}/${id}/user/n`, { method: 'PATCH', headers: as, body: '+1' })).status).toBe(200);
    expect((await call(`${server.api}/${id}/user/3`, { method: 'DELETE', headers: as })).status).toBe(204);
    expectError(await call(`${server.api}/${id}/other`, { method: 'POST', headers: as, body: 'x' }), 403, 'forbidden');
    expect(
      (await call(`${server.api}/${id}`, { method: 'POST', ...json({ txn: [{ set: 'user/4', value: 1 }, { delete: 'user/4' }] }, as) }))
        .status,
    ).toBe(204);
    expectError(
      await call(`${server.api}/${id}`, {
        method: 'POST',
        headers: { ...as, 'content-type': 'application/json' },
        body: JSON.stringify({
          txn: [
            { set: 'user/5', value: 1 },
            { set: 'other', value: 1 },
          ],
        }),
      }),
      403,
      'forbidden',
    );
    expectError(await call(`${server.api}/${id}/user/5`, { headers: admin('s') }), 404, 'not_found');
    expect((await call(`${server.api}/${id}/other`, { headers: admin('s') })).text).toBe('secret stuff');
  });
  it('an expired token is refused with 401', async () => {
    const short = await tokenFor({ prefix: 'user/', permissions: 'read', ttl: '1' });
    expect((await call(`${server.api}/${id}/user/1`, { headers: { authorization: `Bearer ${short}` } })).status).toBe(200);
    clock.advance(1000);
    expectError(await call(`${server.api}/${id}/user/1`, { headers: { authorization: `Bearer ${short}` } }), 401, 'unauthorized');
  });
  it('rotating or clearing the signing key invalidates earlier tokens at once', async () => {
    const rotating = await createBucket(server.api, { secret_key: 's', read_key: 'r', signing_key: 'k1' });
    const mintHere = async () =>
      (
        (
          await call(`${server.api}/${rotating}/tokens/`, {
            method: 'POST',
            headers: admin('s'),
            body: new URLSearchParams({ prefix: 'a', permissions: 'read', ttl: '60' }),
          })
        ).json() as { access_token: string }
      ).access_token;
    await call(`${server.api}/${rotating}/a`, { method: 'POST', headers: admin('s'), body: 'x' });
    const old = await mintHere();
    const read = (token: string) => call(`${server.api}/${rotating}/a`, { headers: { authorization: `Bearer ${token}` } });
    expect((await read(old)).status).toBe(200);
    await call(`${server.api}/${rotating}`, { method: 'PATCH', ...json({ signing_key: 'k2' }, admin('s')) });
    expectError(await read(old), 401, 'unauthorized');
    const fresh = await mintHere();
    expect((await read(fresh)).status).toBe(200);
    // Setting the same key again still rotates.
    await call(`${server.api}/${rotating}`, { method: 'PATCH', ...json({ signing_key: 'k2' }, admin('s')) });
    expectError(await read(fresh), 401, 'unauthorized');
    const last = await mintHere();
    await call(`${server.api}/${rotating}`, { method: 'PATCH', ...json({ signing_key: null }, admin('s')) });
    expectError(await read(last), 401, 'unauthorized');
  });
  it('a token of another bucket is refused even with the same signing key', async () => {
    const a = await createBucket(server.api, { secret_key: 's', read_key: 'r', signing_key: 'same' });
    const b = await createBucket(server.api, { secret_key: 's', read_key: 'r', signing_key: 'same' });
    const token = (
      (
        await call(`${server.api}/${a}/tokens/`, {
          method: 'POST',
          headers: admin('s'),
          body: new URLSearchParams({ prefix: 'k', permissions: 'read', ttl: '60' }),
        })
      ).json() as { access_token: string }
    ).access_token;
    expectError(await call(`${server.api}/${b}/k`, { headers: { authorization: `Bearer ${token}` } }), 401, 'unauthorized');
  });
  it('forged tokens are refused: alg none, HS512, wrong key, tampered prefix, future nbf, signed with the signing key itself', async () => {
    const now = Math.floor(Date.now() / 1000);
    const claims = { bkt: id, pfx: 'user/', perm: ['read'], gen: 0, iat: now, exp: now + 60 };
    // Tokens are signed with a key derived from the signing key and a salt the server never
    // reveals, so even the signing key itself forges nothing: every variant below is refused.
    const key = new TextEncoder().encode('signing');
    const b64 = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
    const minted = await call(`${server.api}/${id}/tokens/`, {
      method: 'POST',
      headers: admin('s'),
      body: new URLSearchParams({ prefix: 'user/', permissions: 'read', ttl: '60' }),
    });
    const good = (minted.json() as { access_token: string }).access_token;
    const [h, , sig] = good.split('.');
    const forged = [
      await new SignJWT(claims).setProtectedHeader({ alg: 'HS256' }).sign(key),
      `${b64({ alg: 'none', typ: 'JWT' })}.${b64(claims)}.`,
      await new SignJWT(claims).setProtectedHeader({ alg: 'HS512' }).sign(key),
      await new SignJWT(claims).setProtectedHeader({ alg: 'HS256' }).sign(new TextEncoder().encode('guess')),
      `${h}.${b64({ ...claims, pfx: 'o' })}.${sig}`,
      await new SignJWT({ ...claims, nbf: now + 3600 }).setProtectedHeader({ alg: 'HS256' }).sign(key),
    ];
    expect((await call(`${server.api}/${id}/user/1`, { headers: { authorization: `Bearer ${good}` } })).status).toBe(200);
    for (const token of forged) {
      expectError(await call(`${server.api}/${id}/user/1`, { headers: { authorization: `Bearer ${token}` } }), 401, 'unauthorized');
    }
  });
});

describe('Operator controls', () => {
  it('--bucket-creation-key: creating a bucket needs it as a Bearer credential', async () => {
    const guarded = await startAppServer({ config: { bucketCreationKey: 'op-key' } });
    try {
      const form = () => new URLSearchParams({ email: 'a@b' });
      expectError(await call(`${guarded.api}/`, { method: 'POST', body: form() }), 401, 'unauthorized');
      expectError(await call(`${guarded.api}/`, { method: 'POST', body: form(), headers: admin('wrong') }), 401, 'unauthorized');
      expect((await call(`${guarded.api}/`, { method: 'POST', body: form(), headers: admin('op-key') })).status).toBe(201);
    } finally {
      await guarded.stop();
    }
  });
  it('--require-secret-key and --default-ttl', async () => {
    const strict = await startAppServer({ config: { requireSecretKey: true, defaultTtl: 60 } });
    try {
      expectError(await call(`${strict.api}/`, { method: 'POST', body: new URLSearchParams({ email: 'a@b' }) }), 400, 'bad_request');
      const id = (await call(`${strict.api}/`, { method: 'POST', body: new URLSearchParams({ email: 'a@b', secret_key: 's' }) })).text;
      expect((await call(`${strict.api}/${id}`, { headers: admin('s') })).json()).toMatchObject({ default_ttl: 60 });
    } finally {
      await strict.stop();
    }
  });
});
