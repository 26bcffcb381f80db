import {
  type IncomingMessage,
  type OutgoingHttpHeader,
  type OutgoingHttpHeaders,
  type Server,
  type ServerOptions,
  ServerResponse,
  createServer,
} from 'node:http';
import { type ServerOptions as HttpsServerOptions, createServer as createHttpsServer } from 'node:https';
import { Server as NetServer, type Socket } from 'node:net';

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

/** Requests of one connection waiting for the one before them to be answered. */
const queued = Symbol('kvb.queued');
/** The response a connection is working on, so a drain can still mark it `Connection: close`. */
const answering = Symbol('kvb.answering');
/** When a connection last became idle (connected, or its last answer done), in ms. */
const idleSince = Symbol('kvb.idleSince');
/** Set once an answer on the connection says `Connection: close`: nothing after it is started. */
const lastAnswer = Symbol('kvb.lastAnswer');
/** The request a connection last started, so its close can tell whether its body was all read. */
const started = Symbol('kvb.started');
type QueuedSocket = Socket & {
  [queued]?: Array<() => void>;
  [started]?: IncomingMessage;
  [answering]?: ServerResponse | undefined;
  [idleSince]?: number;
  [lastAnswer]?: boolean;
};

/** Per server: whether it drains, its open connections, and the responses under way. */
const lifecycle = Symbol('kvb.lifecycle');
interface ServerState {
  draining: boolean;
  idleGraceMs: number;
  sockets: Set<QueuedSocket>;
}
type KvbServer = Server & { [lifecycle]?: ServerState };

/**
 * Every answer says `X-Content-Type-Options: nosniff`, added to the header object handed to
 * writeHead (Fastify hands over its reply's headers). A `setHeader` before it would send Node
 * down writeHead's slower merging path for every answer (about 0.9 µs per answer, measured).
 * An answer written without a header object (Node's implicit headers) gets it by `setHeader`.
 */
type Headers = OutgoingHttpHeaders | OutgoingHttpHeader[];
class KvbResponse extends ServerResponse {
  override writeHead(statusCode: number, reason?: string | Headers, headers?: Headers): this {
    const given = typeof reason === 'string' ? headers : reason;
    if (Array.isArray(given)) given.push('x-content-type-options', 'nosniff');
    else if (given) given['x-content-type-options'] = 'nosniff';
    else this.setHeader('x-content-type-options', 'nosniff');
    return typeof reason === 'string' ? super.writeHead(statusCode, reason, headers) : super.writeHead(statusCode, reason);
  }
}

/**
 * The HTTP (or, given `tls`, HTTPS) server under Fastify, with what Fastify does not do:
 * - Pipelined requests on one connection run one after another. Node answers them in order
 *   (RFC 9112 §9.3.2) but starts their handlers at once, so `PUT p`, `GET p`, `DELETE p` sent in
 *   one write used to take effect out of order (the GET and DELETE ran while the PUT read its body).
 *   A request starts only when the previous one on its connection has been answered or aborted.
 * - Every response says `X-Content-Type-Options: nosniff` (KvbResponse): no hook per request.
 * - A drain (drainServer) that answers every request received and drops none (see there), and
 *   starts no pipelined request behind an answer that closes its connection (it could never be
 *   answered, yet it would be applied: a client retrying it would apply it twice).
 * Timeouts are the ones Fastify itself would set on a server it created.
 */
export function createKvbServer(
  handler: Handler,
  options: { http?: ServerOptions; tls?: HttpsServerOptions; keepAliveTimeout: number; requestTimeout: number; connectionTimeout: number },
): Server {
  const state: ServerState = { draining: false, idleGraceMs: 1000, sockets: new Set() };
  const run = (socket: QueuedSocket, req: IncomingMessage, res: ServerResponse) => {
    socket[answering] = res;
    socket[started] = req;
    // 'close' follows both a finished response and an aborted one, so a queue never stalls.
    res.once('close', () => {
      socket[answering] = undefined;
      // After an answer that closed the connection, a pipelined request behind it could never be
      // answered: it is dropped unstarted (its client, told `Connection: close`, knows it was not
      // processed and may retry), never applied and left unanswered.
      if (socket[lastAnswer] || res.shouldKeepAlive === false) {
        socket[lastAnswer] = true;
        socket[queued] = undefined;
        return;
      }
      const next = socket[queued]?.shift();
      if (next) next();
      else {
        socket[queued] = undefined;
        socket[idleSince] = performance.now();
        if (state.draining) closeWhenIdle(state, socket);
      }
    });
    // Draining: this answer is the connection's last (Node closes it once the answer is written).
    if (state.draining) markLast(socket, res);
    handler(req, res);
  };
  const onRequest = (req: IncomingMessage, res: ServerResponse) => {
    const socket = req.socket as QueuedSocket;
    // Arrived behind the connection's last answer (see above): not started, not answered.
    if (socket[lastAnswer]) {
      req.resume();
      return;
    }
    const waiting = socket[queued];
    if (waiting) waiting.push(() => run(socket, req, res));
    else {
      socket[queued] = [];
      run(socket, req, res);
    }
  };
  const http: ServerOptions = { ...options.http, ServerResponse: KvbResponse as typeof ServerResponse };
  const server: KvbServer = options.tls
    ? createHttpsServer({ ...http, ...options.tls, ALPNProtocols: ['http/1.1'] }, onRequest)
    : createServer(http, onRequest);
  server[lifecycle] = state;
  // The socket requests arrive on: the TLS socket for HTTPS, the TCP socket for HTTP.
  server.on(options.tls ? 'secureConnection' : 'connection', (socket: QueuedSocket) => {
    state.sockets.add(socket);
    lingerOnClose(socket);
    socket[idleSince] = performance.now();
    socket.once('close', () => state.sockets.delete(socket));
    if (state.draining) closeWhenIdle(state, socket);
  });
  // A TLS connection whose handshake failed or timed out (`handshakeTimeout`) can be sent no HTTP
  // answer: the 400 of the client-error handler (run first, by https.Server's own listener) waits
  // for a handshake that never comes and held the socket open for good. It is destroyed here.
  if (options.tls) server.on('tlsClientError', (_err: Error, socket: Socket) => socket.destroy());
  server.keepAliveTimeout = options.keepAliveTimeout;
  server.requestTimeout = options.requestTimeout;
  server.setTimeout(options.connectionTimeout);
  return server;
}

/** How long a connection closed while its client still sends goes on being read (nginx: lingering_time). */
const LINGER_MS = 2000;

/**
 * A lingering close (as Apache and nginx do it). An answer that closes its connection before the
 * request's body was all read (a refusal mid-upload: a bound, a credential, a bad line) used to
 * close the socket at once; the client's bytes still arriving then made the kernel send a reset,
 * and a reset makes the client's kernel discard what it has not yet read: the answer itself.
 * Here the connection's sending side is ended and what the client goes on sending is read and
 * dropped until it ends its side or LINGER_MS pass, then it is destroyed. (Node's HTTP parser
 * keeps reading the socket and drops a body no one reads: `req._dump()`.)
 * Node calls `destroySoon` once a `Connection: close` answer is written.
 */
function lingerOnClose(socket: QueuedSocket): void {
  const destroySoon = socket.destroySoon;
  socket.destroySoon = function lingeringDestroySoon(this: QueuedSocket) {
    const req = this[started];
    if (req === undefined || req.complete || this.destroyed) return destroySoon.call(this);
    this.end();
    const stop = () => this.destroy();
    const timer = setTimeout(stop, LINGER_MS).unref();
    this.once('close', () => clearTimeout(timer));
    this.once('end', stop);
    this.resume();
  };
}

/** Makes `res` its connection's last answer: it says `Connection: close`, and no request behind it starts. */
function markLast(socket: QueuedSocket, res: ServerResponse): void {
  res.setHeader('connection', 'close');
  socket[lastAnswer] = true;
}

/**
 * Ends a connection that has no request under way and gets none within the grace (counted from
 * when it became idle). A request that arrives meanwhile is answered (with `Connection: close`):
 * a client that was just answered is likely sending its next request on it that very moment, and
 * ending the connection then would cut that request off. One idle for longer is ended at once.
 */
function closeWhenIdle(state: ServerState, socket: QueuedSocket): void {
  if (socket[queued] !== undefined) return;
  const end = () => {
    if (socket[queued] === undefined && !socket.destroyed) socket.end();
  };
  const waited = performance.now() - (socket[idleSince] ?? 0);
  if (waited >= state.idleGraceMs) end();
  else setTimeout(end, state.idleGraceMs - waited).unref();
}

/**
 * A drain that drops nothing: stop accepting (new connections are refused), answer every request
 * already received, each answer with `Connection: close` (one whose headers are already out, a
 * stream, ends its connection once it is done), and end idle connections after a short grace.
 * Resolves once the last connection has closed. (http.Server.close would also end idle
 * keep-alives at once, racing requests in flight on them: the plain net close is used instead.)
 */
export function drainServer(server: Server, idleGraceMs = 1000): Promise<void> {
  const state = (server as KvbServer)[lifecycle];
  if (!state) return new Promise((resolve) => server.close(() => resolve()));
  state.draining = true;
  state.idleGraceMs = idleGraceMs;
  return new Promise((resolve) => {
    NetServer.prototype.close.call(server, () => resolve());
    for (const socket of state.sockets) {
      const res = socket[answering];
      if (res && !res.headersSent) markLast(socket, res);
      closeWhenIdle(state, socket);
    }
  });
}
