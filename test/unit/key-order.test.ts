import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { compareKeys } from '../../src/values/key-order.js';

const sign = (n: number) => Math.sign(n);
/** Well-formed strings (as keys are) built from code points that meet at the ordering edge cases. */
const codePoint = fc.oneof(
  fc.integer({ min: 0, max: 0x7f }),
  fc.integer({ min: 0xd000, max: 0xd7ff }),
  fc.integer({ min: 0xe000, max: 0xffff }),
  fc.integer({ min: 0x10000, max: 0x10ffff }),
);
const key = fc.array(codePoint, { maxLength: 6 }).map((points) => String.fromCodePoint(...points));

describe('key order', () => {
  it('is the byte order of the keys in UTF-8, as the databases compare them', () => {
    fc.assert(
      fc.property(key, key, (a, b) => {
        expect(sign(compareKeys(a, b))).toBe(sign(Buffer.compare(Buffer.from(a), Buffer.from(b))));
      }),
      { numRuns: 2000 },
    );
  });

  it('puts an astral character after U+E000–U+FFFF, where UTF-16 order puts it before', () => {
    expect(['😀', '～', 'a', 'ab', '', '\ud7ff'].sort(compareKeys)).toEqual(['', 'a', 'ab', '\ud7ff', '～', '😀']);
    expect('😀' < '～').toBe(true); // JavaScript's own order, which listings must not use
  });
});
