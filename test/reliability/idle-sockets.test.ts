import { type Socket, connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { type RunningServer, startServer } from '../helpers/server.js';

describe('slow and idle clients', () => {
  let server: RunningServer;
  beforeAll(async () => {
    server = await startServer();
  });
  afterAll(async () => {
    await server.stop();
  });

  it('200 idle sockets do not stop the server serving others', async () => {
    const { hostname, port } = new URL(server.url);
    const sockets: Socket[] = await Promise.all(
      Array.from(
        { length: 200 },
        () =>
          new Promise<Socket>((resolve, reject) => {
            const socket = connect(Number(port), hostname, () => resolve(socket));
            socket.on('error', reject);
          }),
      ),
    );
    // Half of them start a request and never finish its headers.
    for (const s of sockets.slice(0, 100)) s.write('GET /health HTTP/1.1\r\nHost: x\r\n');
    let closedByServer = 0;
    for (const s of sockets) s.once('close', () => closedByServer++);
    try {
      const results = await Promise.all(Array.from({ length: 20 }, () => fetch(`${server.url}/health`)));
      expect(results.every((r) => r.status === 200)).toBe(true);
      // Answered while every idle socket is still open: the others did not wait for them to be cut.
      expect(closedByServer).toBe(0);
    } finally {
      for (const s of sockets) s.destroy();
    }
  });

  it('a request whose headers never finish is cut off by the headers timeout', { timeout: 60_000 }, async () => {
    // A server of its own with a short headers timeout (15 s by default): the same cut, sooner.
    const short = await startServer({ env: { KVB_HEADERS_TIMEOUT_MS: '1000' } });
    onTestFinished(async () => {
      await short.stop();
    });
    const { hostname, port } = new URL(short.url);
    const closed = await new Promise<boolean>((resolve) => {
      const socket = connect(Number(port), hostname, () => socket.write('GET /health HTTP/1.1\r\nHost: x\r\n'));
      socket.resume(); // read (and drop) the 400 so that 'close' can fire
      socket.on('close', () => resolve(true));
      socket.on('error', () => resolve(true));
      // A guard, not the measure: the close is the event; without a headers timeout none would come.
      setTimeout(() => {
        socket.destroy();
        resolve(false);
      }, 30_000);
    });
    expect(closed).toBe(true);
  });
});
