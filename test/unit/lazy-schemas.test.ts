import Fastify from 'fastify';
import { describe, expect, it, vi } from 'vitest';
import { lazySchemaCompilers } from '../../src/server/lazy-schemas.js';

function app() {
  const schemas = lazySchemaCompilers();
  const fastify = Fastify({ schemaController: { compilersFactory: schemas.builders } });
  return { fastify, schemas };
}

describe('route schemas compiled after start-up', () => {
  it('validates and serialises as Fastify would, whether compiled on first use or by warm()', async () => {
    for (const warmFirst of [false, true]) {
      const { fastify, schemas } = app();
      fastify.get(
        '/n',
        {
          schema: {
            querystring: { type: 'object', properties: { n: { type: 'string', pattern: '^[0-9]+$' } }, required: ['n'] },
            headers: { type: 'object', properties: { 'if-match': { type: 'string', maxLength: 3 } } },
            response: { 200: { type: 'object', properties: { n: { type: 'string' } } } },
          },
        },
        async (request) => ({ n: (request.query as { n: string }).n, dropped: 'not in the response schema' }),
      );
      await fastify.ready();
      if (warmFirst) {
        // warm() compiles one schema per setImmediate turn: run every turn now, so each request
        // below finds its schemas compiled by warm() rather than on first use.
        vi.useFakeTimers({ toFake: ['setImmediate'] });
        try {
          schemas.warm();
          vi.runAllTimers();
        } finally {
          vi.useRealTimers();
        }
      }
      const ok = await fastify.inject({ url: '/n?n=42' });
      expect(ok.statusCode).toBe(200);
      expect(ok.json()).toEqual({ n: '42' });
      const bad = await fastify.inject({ url: '/n?n=x' });
      expect(bad.statusCode).toBe(400);
      expect(bad.json().message).toMatch(/querystring\/n must match pattern/);
      expect((await fastify.inject({ url: '/n' })).json().message).toMatch(/must have required property 'n'/);
      // Header names arrive in lower case; the schema names them so.
      expect((await fastify.inject({ url: '/n?n=1', headers: { 'If-Match': '"1234"' } })).statusCode).toBe(400);
      await fastify.close();
    }
  });

  it('refuses a header schema that names a header with capitals, when the route is registered', async () => {
    const { fastify } = app();
    fastify.get('/h', { schema: { headers: { type: 'object', properties: { 'If-Match': { type: 'string' } } } } }, async () => 'ok');
    await expect(fastify.ready()).rejects.toThrow(/must name "If-Match" in lower case/);
  });
});
