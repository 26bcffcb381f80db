import { describe, expect, it } from 'vitest';
import { expiryOf } from '../robustness/checkers/expiry.js';
import { nameOfRead, nameOfWire, typedName } from '../robustness/typed-values.js';

/**
 * How the robustness suite's extra workloads record what they see (test/robustness/README.md,
 * "Extra workloads"): a typed value gets one name whichever way it is read, and a TTL becomes
 * the interval its expiry lies in.
 */
describe("a typed value's name", () => {
  const read = (type: string, body: Buffer) =>
    nameOfRead({ status: 200, headers: { 'kvb-type': type }, text: body.toString(), bytes: body });
  const bytes = Buffer.from([0xff, 0xfe, 0x00, 0x61]);

  it('is the same from a GET and from the JSON wire form (a transaction get, a watch event), for every type', () => {
    expect(read('bytes', bytes)).toBe(nameOfWire('bytes', bytes.toString('base64')));
    expect(read('json', Buffer.from('{"a":[1,"é"]}'))).toBe(nameOfWire('json', { a: [1, 'é'] }));
    expect(read('float64', Buffer.from('2.5e-7'))).toBe(nameOfWire('float64', 2.5e-7));
    expect(read('float64', Buffer.from('3.0'))).toBe(nameOfWire('float64', 3));
    expect(read('text', Buffer.from('ünï €'))).toBe(nameOfWire('text', 'ünï €'));
    expect(read('int64', Buffer.from('-42'))).toBe(nameOfWire('int64', '-42'));
  });

  it('differs for another type with the same bytes, and for one byte changed', () => {
    expect(typedName('bytes', Buffer.from('abc'))).not.toBe(typedName('text', Buffer.from('abc')));
    expect(typedName('bytes', Buffer.from('abc'))).not.toBe(typedName('bytes', Buffer.from('abd')));
  });
});

describe("a write's expiry", () => {
  it('is exactly the one answered, else between its call and its return plus the TTL, and none without a TTL', () => {
    expect(expiryOf(2, 5000, { call: 0, ret: 10 })).toEqual({ lo: 5000, hi: 5000 });
    expect(expiryOf(2, undefined, { call: 100, ret: 140 })).toEqual({ lo: 2100, hi: 2140 });
    expect(expiryOf(1, undefined, { call: 100, ret: Number.POSITIVE_INFINITY })).toEqual({ lo: 1100, hi: Number.POSITIVE_INFINITY });
    expect(expiryOf(undefined, undefined, { call: 0, ret: 1 })).toBeUndefined();
  });
});
