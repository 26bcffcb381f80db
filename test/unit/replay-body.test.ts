import { Readable } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { describe, expect, it } from 'vitest';
import { replayBody } from '../../src/server/write-lane.js';

/** The stream replayBody hands Fastify's parser for a body the lane read, read to its end. */
async function replayed(body: Buffer): Promise<Buffer> {
  const raw: Record<symbol, unknown> = {};
  const request = { raw } as unknown as FastifyRequest;
  // The lane's mark on the request, as WriteLane.handOver sets it.
  const mark = Object.getOwnPropertySymbols(await markOf(body)).find((s) => s.description === 'kvb.replay');
  raw[mark!] = { body };
  let stream: Readable | undefined;
  replayBody(request, {} as FastifyReply, Readable.from([]), (_err, s) => {
    stream = s;
  });
  const chunks: Buffer[] = [];
  for await (const chunk of stream!) {
    chunks.push(chunk as Buffer);
    if (Buffer.concat(chunks).length > body.length) break; // replayed more than once
  }
  return Buffer.concat(chunks);
}

/** A request object with the lane's replay mark on it, to learn the symbol it uses. */
async function markOf(body: Buffer): Promise<object> {
  const { WriteLane } = await import('../../src/server/write-lane.js');
  const req = {} as Record<symbol, unknown>;
  const lane = new WriteLane(() => undefined, { reads: 0, writes: 0, handedOver: 0 });
  (lane as unknown as { handOver: (t: unknown, r: unknown) => void }).handOver({ req, res: {} }, { body });
  return req;
}

describe('a body the write lane read, replayed to Fastify', () => {
  it.each([0, 1, 16_383, 16_384, 20_000, 65_536])('is replayed once, whole, at %i bytes (the stream ends)', async (size) => {
    const body = Buffer.alloc(size, 0x7b);
    expect(await replayed(body)).toEqual(body);
  });
});
