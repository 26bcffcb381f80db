import { describe, expect, it } from 'vitest';
import { KvbError } from '../../src/errors.js';
import { checkKey, decodeKey, prefixUpperBound } from '../../src/values/keys.js';

describe('keys', () => {
  it('percent-decodes exactly once', () => {
    expect(decodeKey('user%2F42')).toBe('user/42');
    expect(decodeKey('a%2525')).toBe('a%25');
    expect(decodeKey('caf%C3%A9')).toBe('café');
  });
  it('malformed escapes and invalid UTF-8 are 400', () => {
    expect(() => decodeKey('%zz')).toThrow(KvbError);
    expect(() => decodeKey('%')).toThrow(KvbError);
    expect(() => decodeKey('%FF')).toThrow(KvbError);
  });
  it('counts the 128-byte limit in UTF-8 bytes', () => {
    expect(checkKey('a'.repeat(128))).toHaveLength(128);
    expect(() => checkKey('a'.repeat(129))).toThrow(KvbError);
    expect(() => checkKey('é'.repeat(65))).toThrow(KvbError); // 130 bytes, 65 characters
  });
  it('refuses empty keys, non-strings and lone surrogates', () => {
    expect(() => checkKey('')).toThrow(KvbError);
    expect(() => checkKey(5)).toThrow(KvbError);
    expect(() => checkKey('\ud800')).toThrow(KvbError);
  });
  it('computes the exclusive upper bound of a prefix range', () => {
    expect(prefixUpperBound(Buffer.from('ab'))).toEqual(Buffer.from('ac'));
    expect(prefixUpperBound(Buffer.from([0x61, 0xff]))).toEqual(Buffer.from([0x62]));
    expect(prefixUpperBound(Buffer.from([0xff, 0xff]))).toBeUndefined();
  });
});
