import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** One request a receiver got. */
export interface Received {
  headers: http.IncomingHttpHeaders;
  body: string;
  /** The body's events (kvb's delivery shape). */
  events: Array<{ id: string; type: string; key?: string; rev: number; value?: unknown }>;
  /** What it was answered. */
  answer: Answer;
}

/** What the receiver answers a request with: a status, or `hang` (no answer at all). */
export type Answer = number | 'hang';

/**
 * A webhook receiver on 127.0.0.1 (node:http) that records every request and answers as `answer`
 * says for the n-th one (0-based): 200 unless told otherwise.
 */
export async function startReceiver(answer: (n: number) => Answer = () => 200) {
  const received: Received[] = [];
  const hanging = new Set<http.ServerResponse>();
  let respond = answer;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      let events: Received['events'] = [];
      try {
        events = (JSON.parse(body) as { events: Received['events'] }).events;
      } catch {
        // Not kvb's shape: recorded with no events.
      }
      const n = received.length;
      const a = respond(n);
      received.push({ headers: req.headers, body, events, answer: a });
      if (a === 'hang') {
        hanging.add(res);
        return;
      }
      res.writeHead(a, { 'content-type': 'text/plain' }).end(a >= 300 ? `receiver said ${a}` : 'ok');
    });
  });
  let connections = 0;
  server.on('connection', () => connections++);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    received,
    /** TCP connections accepted so far. */
    connections: () => connections,
    /** The events of the requests it acknowledged (a 2xx), in arrival order. */
    acknowledged: () => received.filter((r) => typeof r.answer === 'number' && r.answer < 300).flatMap((r) => r.events),
    answerWith(next: (n: number) => Answer) {
      respond = next;
    },
    async close() {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
