import { type MockInstance, afterAll, beforeAll, describe, expect, it, onTestFinished, vi } from 'vitest';
import { BucketCache } from '../../src/server/bucket-cache.js';
import { Tallies } from '../../src/server/plugins/tallies.js';
import type { ImportStaging } from '../../src/store/store.js';
import { type AppServer, startAppServer } from '../helpers/app-server.js';
import { exportFile } from '../helpers/export-file.js';
import { call, createBucket, expectError } from '../helpers/http.js';

/**
 * A throw anywhere a request reaches (the access log, the request metrics, access control, a
 * route's store call, the import stream) is answered or swallowed, never uncaught: the server
 * answers the next request. In this process, an uncaught throw would also fail the run.
 */
let server: AppServer;
let bucket: string;
/** Spied on before its first use: the store's metrics wrapper binds each method once. */
let storeWrite: MockInstance;
const injected = () => new Error('injected failure');

beforeAll(async () => {
  server = await startAppServer();
  storeWrite = vi.spyOn(server.store, 'write');
  bucket = await createBucket(server.api);
  expect((await call(`${server.api}/${bucket}/k`, { method: 'PUT', body: 'v' })).status).toBe(200);
});
afterAll(async () => {
  await server?.stop();
});
/** A spy that a test's end takes back. */
function spied<T extends MockInstance>(spy: T): T {
  onTestFinished(() => void spy.mockRestore());
  return spy;
}

/** The server still answers: its health and a key read. */
async function stillAnswers(): Promise<void> {
  expect((await call(`${server.url}/health`)).status).toBe(200);
  const read = await call(`${server.api}/${bucket}/k`);
  expect(read.status).toBe(200);
  expect(read.text).toBe('v');
}

/** The pino stream the app's log lines are written to. */
function logStream(): { write(line: string): void } {
  const log = server.app.log as unknown as Record<symbol, { write(line: string): void }>;
  const symbol = Object.getOwnPropertySymbols(log).find((s) => s.description === 'pino.stream');
  return log[symbol!]!;
}

describe('a throw injected into', () => {
  it('the access log (its stream fails while writing the line)', async () => {
    const write = spied(vi.spyOn(logStream(), 'write')).mockImplementationOnce(() => {
      throw injected();
    });
    // Over the socket: `app.inject()` runs the response's finish (where the access line is
    // written) inside the handler's call, so a throw there would be caught by Fastify and go unseen.
    expect((await fetch(`${server.url}/health`)).status).toBe(200);
    await expect.poll(() => write.mock.calls.length).toBeGreaterThan(0);
    await stillAnswers();
  });

  it('the request metrics', async () => {
    // The request's own tally (`GET 200 /api/v1/:bucket/*`), once; the store's tallies go on.
    const original = Tallies.prototype.record;
    let thrown = false;
    spied(vi.spyOn(Tallies.prototype, 'record')).mockImplementation(function (this: Tallies, ...args) {
      if (!thrown && args[0].startsWith('GET 200 ')) {
        thrown = true;
        throw injected();
      }
      return original.apply(this, args);
    });
    expect((await fetch(`${server.api}/${bucket}/k`)).status).toBe(200);
    await expect.poll(() => thrown).toBe(true);
    await stillAnswers();
    expect(server.logs()).toMatch(/the access log or request metrics failed/);
  });

  it('access control (the bucket lookup throws, not even a rejected promise)', async () => {
    // Not cached, for the fast lane and then for Fastify's route: both go on to `get`.
    spied(vi.spyOn(BucketCache.prototype, 'peek')).mockReturnValue(undefined);
    spied(vi.spyOn(BucketCache.prototype, 'get')).mockImplementationOnce(() => {
      throw injected();
    });
    expectError(await call(`${server.api}/${bucket}/k`), 500, 'internal_error');
    await stillAnswers();
  });

  it('a route (its store write throws)', async () => {
    storeWrite.mockImplementationOnce(() => {
      throw injected();
    });
    expectError(await call(`${server.api}/${bucket}/other`, { method: 'PUT', body: 'x' }), 500, 'internal_error');
    await stillAnswers();
    expect((await call(`${server.api}/${bucket}/other`)).status).toBe(404);
  });

  it('the import stream (staging its entries fails)', async () => {
    const begin = server.store.beginImport.bind(server.store);
    spied(vi.spyOn(server.store, 'beginImport')).mockImplementationOnce(async (id: string) => {
      const staging = await begin(id);
      const failing: ImportStaging = Object.create(staging);
      failing.add = async () => {
        throw injected();
      };
      return failing;
    });
    const file = exportFile([{ key: 'imported', type: 'text', value: '"i"' }]);
    const res = await call(`${server.api}/${bucket}`, { method: 'POST', body: file, headers: { 'content-type': 'application/x-ndjson' } });
    expectError(res, 500, 'internal_error');
    await stillAnswers();
    expect((await call(`${server.api}/${bucket}/imported`)).status).toBe(404);
    // The import slot was given back: the next import runs.
    const again = await call(`${server.api}/${bucket}`, {
      method: 'POST',
      body: file,
      headers: { 'content-type': 'application/x-ndjson' },
    });
    expect(again.status, again.text).toBe(200);
  });
});
