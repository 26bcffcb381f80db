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
    setTimeout(done, ms);
  });
}
