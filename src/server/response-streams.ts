import type { FastifyReply } from 'fastify';
import { KvbError } from '../errors.js';

/**
 * Bounds what slow or stalled readers can pin. A streamed response holds at most a page or two of
 * rendered rows (the stream pulls the next page only when the socket has drained), at most
 * `maxStreams` such responses run at once (more are answered 503 with Retry-After, so the total
 * is bounded too), and a client that accepts no byte for `stallMs` is disconnected.
 */
export class ResponseStreams {
  private active = 0;

  constructor(
    readonly maxStreams: number,
    readonly stallMs: number,
  ) {}

  /** Cuts a reader that stops accepting bytes; applies to a response sent at once too (it sits in the socket's buffer). */
  guard(reply: FastifyReply): void {
    const socket = reply.raw.socket;
    if (!socket || this.stallMs <= 0) return;
    // Socket inactivity: no byte written (or read) for stallMs. A reader that drains even slowly keeps it alive.
    const stalled = () => socket.destroy();
    socket.setTimeout(this.stallMs, stalled);
    // Only this response's listener goes: by now Node has set the keep-alive connection's idle
    // timeout, which must stay (clearing the timer left idle connections open for good), and a
    // listener left behind per listing grew without bound on a connection that lists often.
    reply.raw.once('close', () => socket.removeListener('timeout', stalled));
  }

  /** Takes a slot for a multi-page stream, released when the response ends however it ends; 503 when none is free. */
  acquire(reply: FastifyReply): void {
    if (this.active >= this.maxStreams) {
      reply.header('retry-after', '1');
      throw new KvbError('service_unavailable', `too many streamed listings and exports at once (at most ${this.maxStreams})`);
    }
    this.active++;
    reply.raw.once('close', () => {
      this.active--;
    });
  }

  get inUse(): number {
    return this.active;
  }
}
