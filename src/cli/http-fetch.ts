import type { Agent, ClientRequest, IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { FetchInit, FetchResponse } from '../client/http-types.js';

/**
 * The CLI's fetch: one origin over Node's own http/https modules. Start-up time is a feature of a
 * CLI run in shell loops, and these modules come from Node's start-up snapshot and built-in code
 * cache, where an HTTP library (undici: its llhttp WebAssembly, diagnostics channels, HTTP/2) costs a
 * process more than its request. https (TLS, crypto) is loaded only for an https:// server.
 *
 * It enforces the CLI's timeout as three phases (the client itself is given none): connecting, at
 * most 10 s; then the socket idle while the request is sent and the answer's headers awaited; then
 * idle while the body is read (a watch feed's heartbeats keep it going). Each failure carries the
 * code undici gives the same failure, so the one table of reasons (client-errors.ts) names it.
 */
export interface CliFetch {
  fetch(url: string, init: FetchInit): Promise<FetchResponse>;
  /** Closes every connection, including a response still streaming. */
  close(): Promise<void>;
}

const CONNECT_TIMEOUT_CAP_MS = 10_000;

/** An error with the code a reason is looked up by (client-errors.ts). */
function failure(code: string, message: string): Error {
  return Object.assign(new Error(message), { code });
}

/**
 * Node reports a connection the server closed as ECONNRESET ("socket hang up" before the answer,
 * "aborted" during its body); a reset proper (an RST) keeps its own code.
 */
function closedByServer(err: Error & { code?: string }): Error {
  return err.code === 'ECONNRESET' && (err.message === 'socket hang up' || err.message === 'aborted')
    ? failure('UND_ERR_SOCKET', 'other side closed')
    : err;
}

/** Throws (a TypeError) for a URL that is not http:// or https://, before any request. */
export async function cliFetch(origin: string, timeoutMs: number, ca: Buffer | undefined): Promise<CliFetch> {
  const { protocol } = new URL(origin);
  if (protocol !== 'http:' && protocol !== 'https:') throw new TypeError(`unsupported protocol ${protocol}`);
  const tls = protocol === 'https:';
  const http = tls ? await import('node:https') : await import('node:http');
  // Keep-alive: the calls of one command (pages of a listing, a lock's renewals) share connections.
  // A private CA is trusted in place of the system's (as curl --cacert).
  const agent: Agent = new http.Agent({ keepAlive: true, ...(ca && { ca }) });
  const open = new Set<ClientRequest>();

  const fetch = (url: string, init: FetchInit) =>
    new Promise<FetchResponse>((resolve, reject) => {
      const req = http.request(url, { method: init.method, headers: init.headers, agent });
      open.add(req);
      let response: IncomingMessage | undefined;
      const fail = (err: Error) => req.destroy(err);
      req.once('close', () => open.delete(req));
      // After the answer came, an error (the body cut or timed out) reaches its reader instead.
      req.on('error', (err) => reject(closedByServer(err)));

      const signal = init.signal;
      const onAbort = () => fail(signal!.reason instanceof Error ? signal!.reason : failure('ABORT_ERR', 'aborted'));
      if (signal?.aborted) return onAbort();
      signal?.addEventListener('abort', onAbort, { once: true });
      req.once('close', () => signal?.removeEventListener('abort', onAbort));

      req.once('socket', (socket: Socket) => {
        const idle = () => {
          req.setTimeout(timeoutMs, () =>
            response === undefined
              ? fail(failure('UND_ERR_HEADERS_TIMEOUT', 'headers timeout'))
              : response.destroy(failure('UND_ERR_BODY_TIMEOUT', 'body timeout')),
          );
        };
        if (!socket.connecting) return idle();
        const timer = setTimeout(
          () => fail(failure('UND_ERR_CONNECT_TIMEOUT', 'connect timeout')),
          Math.min(timeoutMs, CONNECT_TIMEOUT_CAP_MS),
        );
        socket.once(tls ? 'secureConnect' : 'connect', () => {
          clearTimeout(timer);
          idle();
        });
        socket.once('close', () => clearTimeout(timer));
      });

      req.once('response', (res: IncomingMessage) => {
        response = res;
        // Its errors are for whoever reads the body (chunksOf), not an uncaught exception before that.
        res.on('error', () => undefined);
        resolve(answer(res));
      });
      send(req, init.body).catch(fail);
    });

  return {
    fetch,
    close: async () => {
      for (const req of open) req.destroy();
      agent.destroy();
    },
  };
}

/** Writes the body: text and bytes whole (with a Content-Length), a stream as it comes (chunked). */
async function send(req: ClientRequest, body: FetchInit['body']): Promise<void> {
  if (body === undefined || typeof body === 'string' || body instanceof Uint8Array) {
    req.end(body);
    return;
  }
  for await (const chunk of body as AsyncIterable<Uint8Array>) {
    if (req.destroyed) return;
    if (!req.write(chunk)) await new Promise<void>((resolve) => req.once('drain', resolve).once('close', resolve));
  }
  req.end();
}

/** The body's chunks; a body cut short fails as the request would have. Stopping early drops the connection. */
async function* chunksOf(res: IncomingMessage): AsyncGenerator<Buffer> {
  try {
    for await (const chunk of res) yield chunk as Buffer;
  } catch (err) {
    throw closedByServer(err as Error);
  }
}

function answer(res: IncomingMessage): FetchResponse {
  const bytes = async (): Promise<Buffer> => {
    const chunks: Buffer[] = [];
    for await (const chunk of chunksOf(res)) chunks.push(chunk);
    return Buffer.concat(chunks);
  };
  return {
    status: res.statusCode ?? 0,
    headers: {
      get(name) {
        const value = res.headers[name.toLowerCase()];
        return (Array.isArray(value) ? value[0] : value) ?? null;
      },
    },
    body: chunksOf(res),
    text: async () => (await bytes()).toString('utf8'),
    arrayBuffer: async () => {
      const data = await bytes();
      return data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength) as ArrayBuffer;
    },
  };
}
