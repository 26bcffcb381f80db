import { type Server, type Socket, createConnection, createServer } from 'node:net';

/**
 * A TCP proxy between kvb and PostgreSQL that can cut every connection (destroy both sides, as a
 * network fault or a restarted pooler does) and refuse new ones for a while (the listener closed).
 */
export class TcpProxy {
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  port = 0;

  constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
  ) {}

  /** Listens (on the same port as before, after a refuse). */
  async open(): Promise<void> {
    const server = createServer((client) => {
      const upstream = createConnection({ host: this.targetHost, port: this.targetPort });
      for (const [a, b] of [
        [client, upstream],
        [upstream, client],
      ] as const) {
        this.sockets.add(a);
        a.on('error', () => b.destroy());
        a.on('close', () => {
          this.sockets.delete(a);
          b.destroy();
        });
        a.pipe(b);
      }
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => resolve());
    });
    this.port = (server.address() as { port: number }).port;
    this.server = server;
  }

  /** Destroys every open connection, both sides. Returns how many client connections there were. */
  cut(): number {
    const count = this.sockets.size / 2;
    for (const socket of this.sockets) socket.destroy();
    this.sockets.clear();
    return count;
  }

  /** Stops accepting (new connections are refused) and cuts the open ones. */
  async refuse(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    this.cut();
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  async close(): Promise<void> {
    await this.refuse();
  }
}
