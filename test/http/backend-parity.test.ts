import { describe, expect } from 'vitest';
import { serverTest } from '../helpers/app-server.js';
import { call, createBucket, expectError, json } from '../helpers/http.js';

/** Inputs one storage engine takes in its stride and another might choke on (PostgreSQL text cannot hold NUL). */
const it = serverTest();

describe(`storage edge cases behave alike on every backend`, () => {
  it.for(['/api/v1/%00abc/key', '/api/v1/abc%00/', '/api/v1/%00', '/api/v1/%00abc'])(
    'a bucket id with NUL is 404: GET %s',
    async (path, { server }) => {
      expectError(await call(`${server.url}${path}`), 404, 'not_found');
    },
  );

  it('a write to a bucket id with NUL is 404', async ({ server }) => {
    expectError(await call(`${server.api}/%00x/k`, { method: 'PUT', body: 'x' }), 404, 'not_found');
  });

  it('a signing key may contain NUL: tokens are minted and verified with it', async ({ server }) => {
    const id = await createBucket(server.api, { secret_key: 's', signing_key: 'a\u0000b' });
    expect(
      (await call(`${server.api}/${id}`, { method: 'PATCH', ...json({ signing_key: 'x\u0000y' }, { authorization: 'Bearer s' }) })).status,
    ).toBe(204);
    const mint = await call(`${server.api}/${id}/tokens/`, {
      method: 'POST',
      headers: { authorization: 'Bearer s' },
      body: new URLSearchParams({ prefix: 'p', permissions: 'read', ttl: '60' }),
    });
    const token = (mint.json() as { access_token: string }).access_token;
    await call(`${server.api}/${id}/p1`, { method: 'PUT', headers: { authorization: 'Bearer s' }, body: 'v' });
    expect((await call(`${server.api}/${id}/p1`, { token })).text).toBe('v');
  });
});
