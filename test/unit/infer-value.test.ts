import { describe, expect, it } from 'vitest';
import { KvbError } from '../../src/errors.js';
import { inferValue, mediaType } from '../../src/values/infer-value.js';

const infer = (body: string | Buffer, contentType?: string) => inferValue(typeof body === 'string' ? Buffer.from(body) : body, contentType);

describe('type inference, in the spec order of evidence', () => {
  it('application/json (with parameters) is JSON, even for a number', () => {
    expect(infer('3', 'application/json; charset=utf-8')).toEqual({ type: 'json', data: Buffer.from('3') });
  });
  it('text/plain (with parameters) is text, even for JSON', () => {
    expect(infer('{"a":1}', 'text/plain;charset=UTF-8').type).toBe('text');
  });
  it('explicit application/octet-stream is bytes, even for a number', () => {
    expect(infer('42', 'application/octet-stream').type).toBe('bytes');
  });
  it('a number body is Int64 or Float64, stored canonically', () => {
    expect(infer('42', 'application/x-www-form-urlencoded')).toEqual({ type: 'int64', data: Buffer.from('42') });
    expect(infer('-0')).toEqual({ type: 'int64', data: Buffer.from('0') });
    expect(infer('2.50')).toEqual({ type: 'float64', data: Buffer.from('2.5') });
    expect(infer('1e2')).toEqual({ type: 'float64', data: Buffer.from('100.0') });
  });
  it('an integer beyond Int64 is JSON, kept exactly', () => {
    expect(infer('12345678901234567890')).toEqual({ type: 'json', data: Buffer.from('12345678901234567890') });
  });
  it('valid JSON without a JSON Content-Type is JSON, raw text kept', () => {
    expect(infer(' {"__proto__": 1} ')).toEqual({ type: 'json', data: Buffer.from(' {"__proto__": 1} ') });
  });
  it('anything else is bytes: plain words, empty, invalid UTF-8', () => {
    expect(infer('hello').type).toBe('bytes');
    expect(infer('').type).toBe('bytes');
    expect(infer(Buffer.from([0xff, 0xfe, 0x00])).data).toEqual(Buffer.from([0xff, 0xfe, 0x00]));
  });
  it('a JSON Content-Type with invalid JSON is a 400', () => {
    expect(() => infer('{nope', 'application/json')).toThrow(KvbError);
  });
  it('a text Content-Type with invalid UTF-8 is a 400', () => {
    expect(() => infer(Buffer.from([0xc3, 0x28]), 'text/plain')).toThrow(KvbError);
  });
  it('media types are compared without parameters and case', () => {
    expect(mediaType('Text/Plain ; charset=utf-8')).toBe('text/plain');
    expect(mediaType(undefined)).toBe('');
  });
});
