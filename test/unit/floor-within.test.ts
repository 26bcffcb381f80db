import { describe, expect, it } from 'vitest';
import { floorWithin } from '../../src/store/floor-within.js';

describe('floorWithin: the floor that keeps history within its byte bound', () => {
  const newestFirst = [
    { revision: 5, bytes: 40 },
    { revision: 4, bytes: 40 },
    { revision: 3, bytes: 40 },
    { revision: 2, bytes: 40 },
  ];
  it('keeps the newest revisions that fit and raises the floor to the newest that does not', () => {
    expect(floorWithin(newestFirst, 100)).toBe(3);
    expect(floorWithin(newestFirst, 120)).toBe(2);
  });
  it('leaves the floor alone when everything fits, or when there is no bound', () => {
    expect(floorWithin(newestFirst, 160)).toBeUndefined();
    expect(floorWithin(newestFirst, 0)).toBeUndefined();
    expect(floorWithin([], 10)).toBeUndefined();
  });
  it('a newest revision larger than the bound goes too: the floor rises to it', () => {
    expect(floorWithin([{ revision: 9, bytes: 500 }], 100)).toBe(9);
  });
});
