import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Random } from './random.js';
import { now } from './recorder.js';
import type { ReceiverAnswer, WebhookDelivery } from './webhook-history.js';

/** How often the receiver fails a request on purpose while faults last: each of 500, hang and drop. */
const FAULT_CHANCE = { error: 0.08, hang: 0.04, drop: 0.04 };

/**
 * The webhook scenarios' receiver, in the runner's process: records every request (body,
 * `kvb-signature`, arrival time, its answer) and, while faults last, fails some on purpose with the
 * scenario's seeded randomness: a 500, no answer at all (the sender's timeout ends it), or the
 * connection closed before any answer. A 2xx is always answered whole, so an acknowledgement the
 * sender missed can only come from the sender dying. Each subscription posts to its own path,
 * `/hook/<n>`.
 */
export class WebhookReceiver {
  readonly deliveries: WebhookDelivery[] = [];
  private server: http.Server | undefined;
  private readonly hanging = new Set<http.ServerResponse>();
  private faulting = true;
  port = 0;

  constructor(
    private readonly random: Random,
    /** The subscription id for the n-th path, once it is known (the path is chosen before the id). */
    private readonly subscriptionOf: (path: string) => string,
  ) {}

  url(n: number): string {
    return `http://127.0.0.1:${this.port}/hook/${n}`;
  }

  async start(): Promise<void> {
    this.server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => this.answer(req, res, Buffer.concat(chunks).toString('utf8')));
      req.on('error', () => {});
    });
    this.server.keepAliveTimeout = 1000;
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
  }

  /** From now on every request is answered 200: the run is healing. */
  heal(): void {
    this.faulting = false;
  }

  private pick(): ReceiverAnswer {
    if (!this.faulting) return 'ok';
    const r = this.random.next();
    if (r < FAULT_CHANCE.error) return 'error';
    if (r < FAULT_CHANCE.error + FAULT_CHANCE.hang) return 'hang';
    if (r < FAULT_CHANCE.error + FAULT_CHANCE.hang + FAULT_CHANCE.drop) return 'drop';
    return 'ok';
  }

  private answer(req: http.IncomingMessage, res: http.ServerResponse, body: string): void {
    const answer = this.pick();
    const signature = req.headers['kvb-signature'];
    this.deliveries.push({
      subscription: this.subscriptionOf(req.url ?? ''),
      at: now(),
      body,
      signature: Array.isArray(signature) ? signature.join(',') : signature,
      answer,
    });
    switch (answer) {
      case 'ok':
        res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
        return;
      case 'error':
        res.writeHead(500, { 'content-type': 'text/plain' }).end('failing on purpose');
        return;
      case 'hang':
        // Never answered: closed after 1.5 s, before the sender's timeout (its timeout is the scenario's margin for stalls).
        this.hanging.add(res);
        res.on('close', () => this.hanging.delete(res));
        setTimeout(() => req.socket.destroy(), 1500).unref();
        return;
      case 'drop':
        req.socket.destroy();
        return;
    }
  }

  async close(): Promise<void> {
    for (const res of this.hanging) res.destroy();
    const server = this.server;
    if (!server) return;
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
}
