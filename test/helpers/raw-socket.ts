import { type Socket, connect } from 'node:net';

/** Opens a raw TCP connection to the server (half-open allowed, so the test sees what the server does). */
export function rawSocket(server: { url: string }): Promise<Socket> {
  const { hostname, port } = new URL(server.url);
  return new Promise((resolve, reject) => {
    const socket = connect({ port: Number(port), host: hostname, allowHalfOpen: true }, () => resolve(socket));
    socket.on('error', reject);
  });
}

/** Collects everything the server sends until it ends its side (or `ms` pass). */
export function readUntilEnd(socket: Socket, ms = 10_000): Promise<string> {
  return new Promise((resolve) => {
    let text = '';
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => (text += chunk));
    const done = () => resolve(text);
    socket.once('end', done);
    socket.once('close', done);
    // A guard: the server's end of the connection is the event; this only bounds a hang.
    setTimeout(done, ms);
  });
}

/**
 * Writes a request's head (its header lines, without the blank line) with `Expect: 100-continue` and resolves once the server answers
 * `100 Continue`: the event that says the server has read the head and is running the request,
 * so a test can act on a request that is in flight rather than guess when it arrived.
 */
export function startRequest(socket: Socket, head: string): Promise<void> {
  return new Promise((resolve, reject) => {
    let seen = '';
    const onData = (chunk: Buffer | string) => {
      seen += chunk.toString();
      if (!seen.includes('\r\n\r\n')) return;
      socket.off('data', onData);
      if (seen.startsWith('HTTP/1.1 100 ')) resolve();
      else reject(new Error(`expected 100 Continue, got: ${seen}`));
    };
    socket.on('data', onData);
    socket.write(`${head.endsWith('\r\n') ? head : `${head}\r\n`}Expect: 100-continue\r\n\r\n`);
  });
}
