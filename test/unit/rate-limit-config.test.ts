import { describe, expect, it } from 'vitest';
import { parseRateLimit } from '../../src/server/server-config.js';

describe('--rate-limit and --bucket-creation-rate: N/WINDOW', () => {
  it.each([
    ['600/1m', { max: 600, windowMs: 60_000 }],
    ['10/s', { max: 10, windowMs: 1000 }],
    ['100/30s', { max: 100, windowMs: 30_000 }],
    ['5000/1h', { max: 5000, windowMs: 3_600_000 }],
    [' 7/2m ', { max: 7, windowMs: 120_000 }],
  ])('%j is %j', (text, expected) => {
    expect(parseRateLimit(text)).toEqual(expected);
  });
  it.each(['', '10', '0/1m', '10/0s', '10/1d', '10 per minute', '-1/1m', '1.5/1m', '10/m/s'])('%j is refused', (text) => {
    expect(parseRateLimit(text)).toBeUndefined();
  });
});
