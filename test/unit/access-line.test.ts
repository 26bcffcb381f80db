import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import type { FastifyBaseLogger } from 'fastify';
import { type AccessFields, directAccessLine } from '../../src/server/access-line.js';

/** A pino logger as app.ts sets one up (redaction, a req serializer), writing into `lines`. */
function logger(lines: string[], options: pino.LoggerOptions = {}) {
  const stream = { write: (line: string) => lines.push(line) };
  const log = pino(
    { level: 'info', redact: ['req.headers.authorization', 'req.headers.cookie'], serializers: { req: (r: unknown) => r }, ...options },
    stream,
  );
  return log as unknown as FastifyBaseLogger;
}

const CASES: AccessFields[] = [
  { method: 'GET', route: '/api/v1/:bucket/*', url: '/api/v1/b/k', status: 200, ms: 0.35, bytes: 70, ip: '127.0.0.1' },
  { method: 'PUT', route: null, url: '/api/v1/b/"quoted"\\back\u0001slash%20é', status: 404, ms: 12, bytes: null, ip: null },
  { method: 'DELETE', route: '/health', url: `/${'x'.repeat(300)}`, status: 204, ms: Number.NaN, bytes: 0, ip: '::ffff:10.0.0.1' },
];

describe('the lanes’ access line', () => {
  it('is byte for byte the line pino writes for the same fields', () => {
    const viaPino: string[] = [];
    const direct: string[] = [];
    const write = directAccessLine(logger(direct));
    expect(write).toBeDefined();
    for (const [i, fields] of CASES.entries()) {
      const id = `req-${i}`;
      logger(viaPino).info({ req_id: id, ...fields }, 'request');
      write!(id, fields);
    }
    // Only the time differs between two calls: pino's own time function gives it in both.
    const untimed = (line: string) => line.replace(/"time":\d+/, '"time":0');
    expect(direct.map(untimed)).toEqual(viaPino.map(untimed));
    for (const line of direct) expect(JSON.parse(line)).toMatchObject({ level: 30, msg: 'request' });
  });

  it('is left to pino when the logger is set up in a way it does not reproduce', () => {
    expect(directAccessLine(logger([], { mixin: () => ({ extra: 1 }) }))).toBeUndefined();
    expect(directAccessLine(logger([], { formatters: { log: (o) => o } }))).toBeUndefined();
    expect(directAccessLine(logger([], { messageKey: 'message' }))).toBeUndefined();
    expect(directAccessLine(logger([], { nestedKey: 'payload' }))).toBeUndefined();
    expect(directAccessLine(logger([], { level: 'warn' }))).toBeUndefined();
  });
});
