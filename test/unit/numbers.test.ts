import { describe, expect, it } from 'vitest';
import { INT64_MAX, INT64_MIN, addNumbers, formatFloat, parseDelta, parseNumber } from '../../src/values/numbers.js';

describe('number grammar', () => {
  it.each(['0', '-0', '42', '-9223372036854775808', '9223372036854775807'])('%s is Int64', (text) => {
    expect(parseNumber(text)?.kind).toBe('int64');
  });
  it('keeps Int64 exact at both ends', () => {
    expect(parseNumber('9223372036854775807')).toEqual({ kind: 'int64', value: INT64_MAX });
    expect(parseNumber('-9223372036854775808')).toEqual({ kind: 'int64', value: INT64_MIN });
  });
  it.each(['1.5', '-0.25', '1e3', '1E-7', '2.0'])('%s is Float64', (text) => {
    expect(parseNumber(text)?.kind).toBe('float64');
  });
  it.each(['', ' 1', '1 ', '+1', '0x10', '01', '1.', '.5', 'NaN', 'Infinity', '1e', '--1', '1_000'])('%j is not a number', (text) =>
    expect(parseNumber(text)).toBeUndefined(),
  );
  it('integers outside Int64 and overflowing floats are not numbers', () => {
    expect(parseNumber('9223372036854775808')).toBeUndefined();
    expect(parseNumber('-9223372036854775809')).toBeUndefined();
    expect(parseNumber('1e400')).toBeUndefined();
  });
  it('formats floats so they read back as floats', () => {
    expect(formatFloat(3)).toBe('3.0');
    expect(formatFloat(0.1)).toBe('0.1');
    expect(formatFloat(1e21)).toBe('1e+21');
    expect(formatFloat(-2.5)).toBe('-2.5');
    expect(parseNumber(formatFloat(1e21))?.kind).toBe('float64');
  });
});

describe('counter deltas', () => {
  it.each([
    ['+1', { kind: 'int64', value: 1n }],
    ['-1', { kind: 'int64', value: -1n }],
    ['+2.5', { kind: 'float64', value: 2.5 }],
    ['-1e3', { kind: 'float64', value: -1000 }],
  ])('%s parses', (text, expected) => expect(parseDelta(text)).toEqual(expected));
  it.each(['1', '++1', '+-1', '--1', '+', '-', '+NaN', '+Infinity', '+0x10', '+1e400', '+ 1', ''])('%j is refused', (text) => {
    expect(parseDelta(text)).toBeUndefined();
  });
});

describe('counter arithmetic', () => {
  const int = (value: bigint) => ({ kind: 'int64' as const, value });
  const float = (value: number) => ({ kind: 'float64' as const, value });
  it('Int64 + Int64 stays Int64 and exact', () => {
    expect(addNumbers(int(INT64_MAX - 1n), int(1n))).toEqual({ ok: true, value: int(INT64_MAX) });
  });
  it('overflow is refused at both ends', () => {
    expect(addNumbers(int(INT64_MAX), int(1n)).ok).toBe(false);
    expect(addNumbers(int(INT64_MIN), int(-1n)).ok).toBe(false);
  });
  it('any float operand gives Float64', () => {
    expect(addNumbers(int(1n), float(0.5))).toEqual({ ok: true, value: float(1.5) });
    expect(addNumbers(float(1.5), int(1n))).toEqual({ ok: true, value: float(2.5) });
  });
  it('a non-finite result is refused', () => {
    expect(addNumbers(float(Number.MAX_VALUE), float(Number.MAX_VALUE)).ok).toBe(false);
  });
});
