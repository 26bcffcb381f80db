import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decodeReply, decodeRequests, encodeReply, encodeRequests, sendError } from '../../src/store/sqlite/sqlite-write-protocol.js';
import { WireEncoder, decodeAll, encodeAll } from '../../src/store/sqlite/sqlite-wire.js';
import { writeOp } from '../helpers/write-op-arbitraries.js';

/**
 * The bytes between the request thread and the SQLite writer (sqlite-wire.ts) give back what was
 * sent: every shape a write or an answer has, Buffers as Buffers, properties in their order,
 * undefined ones kept, numbers of every size, text that is not ASCII.
 */
const roundTrip = (values: unknown[]) => decodeAll(encodeAll(new WireEncoder(), values));

/** `value` with every object an ordinary one (fast-check makes some without a prototype; the wire gives back ordinary ones). */
function ordinary(value: unknown): unknown {
  if (value === null || typeof value !== 'object' || Buffer.isBuffer(value)) return value;
  if (Array.isArray(value)) return value.map(ordinary);
  if (value instanceof Map) return new Map([...value].map(([k, v]) => [k, ordinary(v)]));
  const object: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value))
    Object.defineProperty(object, k, { value: ordinary(v), enumerable: true, writable: true, configurable: true });
  return object;
}

/** Plain data as the messages hold it: what structured clone would give back the same. */
const plain = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.constant(undefined),
    fc.constant(null),
    fc.boolean(),
    fc.double(),
    fc.integer({ min: 0, max: 2 ** 32 - 1 }),
    fc.bigInt(),
    fc.string({ unit: 'binary' }),
    fc.uint8Array().map((bytes) => Buffer.from(bytes)),
    fc.array(tie('value'), { maxLength: 4 }),
    fc.dictionary(fc.oneof(fc.constantFrom('key', 'value', 'revision', 'op'), fc.string()), tie('value'), { maxKeys: 4 }),
    fc.array(fc.tuple(fc.string(), tie('value')), { maxLength: 3 }).map((pairs) => new Map(pairs)),
  ),
})).value;

describe("the SQLite writer's wire", () => {
  it('gives back any plain value as it was sent, several in one message', () => {
    fc.assert(
      fc.property(fc.array(plain, { maxLength: 5 }), (values) => {
        expect(roundTrip(values)).toStrictEqual(ordinary(values));
      }),
    );
  });

  it('gives back every write as the rules take it, Buffers as Buffers', () => {
    fc.assert(
      fc.property(fc.array(writeOp, { minLength: 1, maxLength: 8 }), (ops) => {
        const requests = ops.map((op) => ({ kind: 'op' as const, bucket: 'b', op }));
        const back = decodeRequests(encodeRequests(new WireEncoder(), requests));
        expect(back).toStrictEqual(ordinary(requests));
        for (const request of back) {
          if (request.kind === 'op' && request.op.op === 'set') expect(Buffer.isBuffer(request.op.value.data)).toBe(true);
        }
      }),
    );
  });

  it('sends only a value’s own bytes, not the buffer it is a view of', () => {
    const slab = Buffer.alloc(64 * 1024, 1);
    const message = encodeAll(new WireEncoder(), [slab.subarray(10, 13)]);
    expect(message.byteLength).toBeLessThan(16);
    expect(decodeAll(message)).toStrictEqual([Buffer.from([1, 1, 1])]);
  });

  it('gives back a reply with its errors and revisions', () => {
    const reply = {
      messages: 2,
      outcomes: [
        { ok: true as const, value: { revision: 7 } },
        { ok: false as const, error: sendError(new Error('näive ✓ failure')) },
        { ok: true as const, value: { refused: 'precondition', current: undefined } },
      ],
      touched: ['b\u0000k', 'b\u0000ключ'],
      clearCache: false,
      revisions: [
        ['b', 7],
        ['gone', null],
      ] as Array<[string, number | null]>,
    };
    expect(decodeReply(encodeReply(new WireEncoder(), reply))).toStrictEqual(reply);
  });

  it('refuses what cannot cross, and the encoder goes on working after', () => {
    const encoder = new WireEncoder();
    expect(() => encodeAll(encoder, [{ key: 'a', run: () => 1 }])).toThrow(TypeError);
    expect(decodeAll(encodeAll(encoder, [{ key: 'a' }]))).toStrictEqual([{ key: 'a' }]);
  });

  it('grows past its first buffer for a large value', () => {
    const big = Buffer.alloc(100_000, 7);
    const [back] = roundTrip([{ value: big, key: 'x'.repeat(5000) }]) as Array<{ value: Buffer; key: string }>;
    expect(back!.value.equals(big)).toBe(true);
    expect(back!.key).toBe('x'.repeat(5000));
  });

  it('keeps a property named __proto__ as a property', () => {
    const sent = JSON.parse('{"__proto__": {"polluted": true}, "key": "k"}');
    const [back] = roundTrip([sent]) as Array<Record<string, unknown>>;
    expect(Object.getPrototypeOf(back)).toBe(Object.prototype);
    expect(Object.keys(back!)).toEqual(['__proto__', 'key']);
  });
});
