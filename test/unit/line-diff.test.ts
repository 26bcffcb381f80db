import { describe, expect, it } from 'vitest';
import { lineDiff } from '../../console/src/line-diff.js';

const render = (before: string, after: string) => lineDiff(before, after).map((l) => `${l.op}${l.text}`);

describe("the console's line diff (a key's version against its current value)", () => {
  it('keeps common lines and marks removed and added ones in order', () => {
    expect(render('a\nb\nc', 'a\nB\nc\nd')).toEqual([' a', '-b', '+B', ' c', '+d']);
  });
  it('equal texts are all kept; an empty side is all added or removed', () => {
    expect(render('x\ny', 'x\ny')).toEqual([' x', ' y']);
    expect(render('', 'x')).toEqual(['-', '+x']);
  });
  it('very long texts fall back to a whole replacement instead of a quadratic table', () => {
    const big = Array.from({ length: 3000 }, (_, i) => String(i)).join('\n');
    const diff = lineDiff(big, `${big}\nmore`);
    expect(diff.filter((l) => l.op === '-')).toHaveLength(3000);
    expect(diff.filter((l) => l.op === '+')).toHaveLength(3001);
  });
});
