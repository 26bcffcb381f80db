import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VERSION } from '../../src/version.js';
import { call, createBucket, expectError } from '../helpers/http.js';
import { type AppServer, startAppServer } from '../helpers/app-server.js';

let server: AppServer;
beforeAll(async () => {
  server = await startAppServer();
});
afterAll(async () => {
  await server.stop();
});

describe('Error envelope', () => {
  it('carries the reason in words as "detail", the same text as the Kvb-Error-Detail header', async () => {
    const bucket = await createBucket(server.api);
    const res = await call(`${server.api}/${bucket}/nope`);
    expect(res.status).toBe(404);
    expect(res.text).toBe('{"error":{"code":404,"message":"not_found","detail":"no such key"}}');
    expect(res.headers.get('kvb-error-detail')).toBe('no such key');
    expectError(await call(`${server.api}/${bucket}/k?ttl=soon`, { method: 'PUT', body: 'v' }), 400, 'bad_request');
  });
});

describe('GET / (not in the API)', () => {
  it('a browser (Accept: text/html) is redirected to the console; an API client keeps the JSON 404 envelope', async () => {
    const browser = await call(`${server.url}/`, {
      headers: { accept: 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8' },
      redirect: 'manual',
    });
    expect(browser.status).toBe(302);
    expect(browser.headers.get('location')).toBe('console/');
    expect(browser.headers.get('vary')).toContain('Accept');
    const followed = await call(`${server.url}/`, { headers: { accept: 'text/html' } });
    expect(followed.status).toBe(200);
    expect(followed.headers.get('content-type')).toMatch(/^text\/html/);
    expectError(await call(`${server.url}/`), 404, 'not_found');
    expectError(await call(`${server.url}/`, { headers: { accept: 'application/json' } }), 404, 'not_found');
    expectError(await call(`${server.url}/`, { method: 'POST', body: 'x' }), 404, 'not_found');
  });
});

describe('Operational endpoints (root)', () => {
  it('GET /health is always ok with the version', async () => {
    const res = await call(`${server.url}/health`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.json()).toEqual({ status: 'ok', storage: 'ok', version: VERSION, max_value_bytes: 16384 });
  });
  it('GET /ready probes storage and answers the same shape', async () => {
    const res = await call(`${server.url}/ready`);
    expect(res.status).toBe(200);
    expect(res.json()).toEqual({ status: 'ok', storage: 'ok', version: VERSION });
  });
  it('GET /metrics is Prometheus text with request counts by route pattern, latency, keys stored and process metrics', async () => {
    const bucket = await createBucket(server.api);
    await call(`${server.api}/${bucket}/some-key`, { method: 'POST', body: 'v' });
    await call(`${server.api}/${bucket}/some-key`);
    const res = await call(`${server.url}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    expect(res.text).toMatch(/^kvb_http_requests_total\{method="GET",route="\/api\/v1\/:bucket\/\*",status="200"\} \d+$/m);
    expect(res.text).toMatch(
      /^kvb_http_request_duration_seconds_bucket\{le="0\.001",method="POST",route="\/api\/v1\/:bucket\/\*",status="200"\} \d+$/m,
    );
    expect(res.text).toMatch(/^kvb_keys_stored \d+$/m);
    expect(res.text).toMatch(/^process_resident_memory_bytes \d+/m);
    expect(res.text).toMatch(/^nodejs_eventloop_lag_seconds /m);
    // Keys and bucket ids never become label values.
    expect(res.text).not.toContain('some-key');
    expect(res.text).not.toContain(bucket);
  });
  it('/api-docs/openapi.json is an OpenAPI 3 document with the version /health reports', async () => {
    const res = await call(`${server.url}/api-docs/openapi.json`);
    expect(res.status).toBe(200);
    const doc = res.json() as { openapi: string; info: { version: string }; paths: Record<string, unknown> };
    expect(doc.openapi).toMatch(/^3\./);
    expect(doc.info.version).toBe(VERSION);
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining(['/health', '/ready', '/api/v1/', '/api/v1/{bucket}', '/api/v1/{bucket}/{key}']),
    );
  });
  it('/swagger-ui/ serves the explorer page', async () => {
    const res = await call(`${server.url}/swagger-ui/`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    expect(res.text).toContain('swagger-ui');
  });
});

describe('HTTP edges', () => {
  it('an unknown route is 404 in the envelope', async () => {
    expectError(await call(`${server.url}/nowhere`), 404, 'not_found');
    expectError(await call(`${server.url}/api/v2/x`), 404, 'not_found');
  });
  it('an unknown bucket is 404', async () => {
    expectError(await call(`${server.api}/00000000-0000-4000-8000-000000000000/k`), 404, 'not_found');
    expectError(await call(`${server.api}/00000000-0000-4000-8000-000000000000`), 404, 'not_found');
  });
  it.each([
    ['PUT', '/api/v1/', 'POST'],
    ['GET', '/api/v1/', 'POST'],
    ['PUT', '/api/v1/b', 'GET, HEAD, POST, PATCH, DELETE'],
    ['POST', '/api/v1/b/', 'GET, DELETE'],
    ['POST', '/health', 'GET, HEAD'],
    ['DELETE', '/metrics', 'GET'],
  ])('%s %s is 405 with Allow: %s', async (method, path, allow) => {
    const res = await call(`${server.url}${path}`, { method });
    expectError(res, 405, 'method_not_allowed');
    expect(res.headers.get('allow')).toBe(allow);
  });
  it('a create-bucket body that is not a form is 400, not 415', async () => {
    const res = await call(`${server.api}/`, { method: 'POST', body: 'email=a@b', headers: { 'content-type': 'text/csv' } });
    expectError(res, 400, 'bad_request');
  });
  it('a form body over 16 KiB is 400, not 413', async () => {
    const res = await call(`${server.api}/`, {
      method: 'POST',
      body: new URLSearchParams({ email: 'a@b', secret_key: 'x'.repeat(20_000) }),
    });
    expectError(res, 400, 'bad_request');
  });
  it('a PATCH body that is not JSON is 400, not 415', async () => {
    const bucket = await createBucket(server.api);
    expectError(
      await call(`${server.api}/${bucket}`, { method: 'PATCH', body: '{}', headers: { 'content-type': 'text/plain' } }),
      400,
      'bad_request',
    );
  });
  it("errors carry their reason in Kvb-Error-Detail and, the same words, in the envelope's detail", async () => {
    const bucket = await createBucket(server.api);
    const res = await call(`${server.api}/${bucket}/${'k'.repeat(129)}`, { method: 'POST', body: 'v' });
    expectError(res, 400, 'bad_request');
    expect(res.headers.get('kvb-error-detail')).toMatch(/128 bytes/);
  });
});

describe('CORS on the product endpoints', () => {
  it('a preflight from any origin is allowed with Authorization, and responses expose the kvb headers', async () => {
    const bucket = await createBucket(server.api);
    const preflight = await call(`${server.api}/${bucket}/k`, {
      method: 'OPTIONS',
      headers: {
        origin: 'https://app.example',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization,content-type',
      },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-origin')).toBe('*');
    expect(preflight.headers.get('access-control-allow-methods')).toContain('POST');
    expect(preflight.headers.get('access-control-allow-headers')?.toLowerCase()).toContain('authorization');
    const set = await call(`${server.api}/${bucket}/k`, { method: 'POST', body: 'v', headers: { origin: 'https://app.example' } });
    expect(set.headers.get('access-control-allow-origin')).toBe('*');
    expect(set.headers.get('access-control-expose-headers')).toContain('Kvb-Type');
  });
  it('with any origin allowed, errors and unknown routes carry the same CORS headers, and a preflight keeps its rules', async () => {
    const bucket = await createBucket(server.api);
    const origin = { origin: 'https://app.example' };
    const set = await call(`${server.api}/${bucket}/k`, { method: 'POST', body: 'v', headers: origin });
    for (const res of [
      await call(`${server.api}/${bucket}/absent`, { headers: origin }),
      await call(`${server.url}/no-such-route`, { headers: origin }),
    ]) {
      expect(res.status).toBe(404);
      expect(res.headers.get('access-control-allow-origin')).toBe('*');
      expect(res.headers.get('access-control-expose-headers')).toBe(set.headers.get('access-control-expose-headers'));
      expect(res.headers.get('vary')).toBe('Origin');
    }
    // A request without Origin (curl, a script, a same-origin page) gets no CORS headers: it has
    // no use for them. Vary says that the answer depends on Origin.
    for (const res of [await call(`${server.api}/${bucket}/k`), await call(`${server.api}/${bucket}/absent`)]) {
      expect(res.headers.get('access-control-allow-origin')).toBeNull();
      expect(res.headers.get('access-control-expose-headers')).toBeNull();
      expect(res.headers.get('vary')).toBe('Origin');
    }
    const preflight = await call(`${server.api}/${bucket}/k`, {
      method: 'OPTIONS',
      headers: { origin: 'https://app.example', 'access-control-request-method': 'PUT' },
    });
    expect(preflight.headers.get('access-control-max-age')).toBe('600');
    expect(preflight.headers.get('access-control-allow-methods')).toBe('GET, HEAD, POST, PUT, PATCH, DELETE');
    // A preflight needs Origin and Access-Control-Request-Method.
    expect((await call(`${server.api}/${bucket}/k`, { method: 'OPTIONS' })).status).toBe(400);
  });
  it('--cors-origin limits the allowed origins', async () => {
    const limited = await startAppServer({ config: { corsOrigin: 'https://good.example' } });
    try {
      const good = await call(`${limited.url}/health`, { headers: { origin: 'https://good.example' } });
      expect(good.headers.get('access-control-allow-origin')).toBe('https://good.example');
      const bad = await call(`${limited.url}/health`, { headers: { origin: 'https://evil.example' } });
      expect(bad.headers.get('access-control-allow-origin')).toBeNull();
    } finally {
      await limited.stop();
    }
  });
});
