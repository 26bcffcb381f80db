import http from 'node:http';
import type { Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AppServer, startAppServer } from '../helpers/app-server.js';
import { createBucket } from '../helpers/http.js';
import { TEST_BACKEND } from '../helpers/backend.js';

/** Answers to GETs sent one after another on one kept connection. */
function getter(url: string) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const get = (path: string) =>
    new Promise<number>((resolve, reject) => {
      http
        .get(new URL(path, url), { agent }, (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        })
        .on('error', reject);
    });
  return { get, close: () => agent.destroy() };
}

describe(`listings on a kept connection (${TEST_BACKEND})`, () => {
  let server: AppServer;
  let bucket: string;
  const sockets: Socket[] = [];
  beforeAll(async () => {
    server = await startAppServer();
    bucket = await createBucket(server.api);
    server.app.server.on('connection', (socket: Socket) => sockets.push(socket));
  });
  afterAll(async () => server?.stop());

  it('leave the connection its idle timeout, and no listener per listing behind', async () => {
    const client = getter(server.url);
    try {
      // An answer that is no listing: what Node leaves an idle kept connection (its keep-alive timeout).
      expect(await client.get('/health')).toBe(200);
      expect(sockets).toHaveLength(1);
      const [socket] = sockets as [Socket];
      const idle = { timeout: socket.timeout, listeners: socket.listenerCount('timeout') };
      expect(idle.timeout).toBeGreaterThanOrEqual(server.app.server.keepAliveTimeout);
      for (let i = 0; i < 30; i++) expect(await client.get(`/api/v1/${bucket}/?limit=5`)).toBe(200);
      expect(sockets).toHaveLength(1);
      expect({ timeout: socket.timeout, listeners: socket.listenerCount('timeout') }).toEqual(idle);
    } finally {
      client.close();
    }
  });
});
