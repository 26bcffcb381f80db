import { type IncomingMessage, type Server, type ServerOptions, type ServerResponse, createServer } from 'node:http';
import type { Socket } from 'node:net';

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

/** Requests of one connection waiting for the one before them to be answered. */
const queued = Symbol('kvb.queued');
type QueuedSocket = Socket & { [queued]?: Array<() => void> };

/**
 * The HTTP server under Fastify, with two things Fastify does not do:
 * - Pipelined requests on one connection run one after another. Node answers them in order
 *   (RFC 9112 §9.3.2) but starts their handlers at once, so `PUT p`, `GET p`, `DELETE p` sent in
 *   one write used to take effect out of order (the GET and DELETE ran while the PUT read its body).
 *   A request starts only when the previous one on its connection has been answered or aborted.
 * - Every response says `X-Content-Type-Options: nosniff`: one header set here, no hook per request.
 * Timeouts are the ones Fastify itself would set on a server it created.
 */
export function createKvbServer(
  handler: Handler,
  options: { http?: ServerOptions; keepAliveTimeout: number; requestTimeout: number; connectionTimeout: number },
): Server {
  const run = (socket: QueuedSocket, req: IncomingMessage, res: ServerResponse) => {
    // 'close' follows both a finished response and an aborted one, so a queue never stalls.
    res.once('close', () => {
      const next = socket[queued]?.shift();
      if (next) next();
      else socket[queued] = undefined;
    });
    handler(req, res);
  };
  const server = createServer(options.http ?? {}, (req, res) => {
    res.setHeader('x-content-type-options', 'nosniff');
    const socket = req.socket as QueuedSocket;
    const waiting = socket[queued];
    if (waiting) waiting.push(() => run(socket, req, res));
    else {
      socket[queued] = [];
      run(socket, req, res);
    }
  });
  server.keepAliveTimeout = options.keepAliveTimeout;
  server.requestTimeout = options.requestTimeout;
  server.setTimeout(options.connectionTimeout);
  return server;
}
