import { describe, expect, it } from 'vitest';
import type { Entry } from '../../src/store/store.js';
import { formatFromAccept, formatListItem, valueAsJson } from '../../src/values/list-format.js';

const entry = (type: Entry['type'], data: string | Buffer): Entry => ({
  type,
  data: typeof data === 'string' ? Buffer.from(data) : data,
  expiresAt: null,
  revision: 0,
});

describe('list formats', () => {
  it('negotiates Accept by quality, then order', () => {
    expect(formatFromAccept(undefined)).toBe('text');
    expect(formatFromAccept('application/json')).toBe('json');
    expect(formatFromAccept('application/x-ndjson')).toBe('jsonl');
    expect(formatFromAccept('text/plain;q=0.5, application/json')).toBe('json');
    expect(formatFromAccept('application/json;q=0.2, application/x-ndjson;q=0.9')).toBe('jsonl');
    expect(formatFromAccept('*/*')).toBe('text');
    expect(formatFromAccept('image/png')).toBeUndefined();
    expect(formatFromAccept('application/json;q=0')).toBeUndefined();
  });
  it('renders values as JSON by type', () => {
    expect(valueAsJson(entry('json', '{ "a" : 1 }'))).toBe('{"a":1}');
    expect(valueAsJson(entry('int64', '-9223372036854775808'))).toBe('-9223372036854775808');
    expect(valueAsJson(entry('text', 'a"b'))).toBe('"a\\"b"');
    expect(valueAsJson(entry('bytes', Buffer.from([0xff])))).toBe('"/w=="');
  });
  it('escapes text lines so they can be split back', () => {
    expect(formatListItem('text', 'a=b\nc\\', entry('text', 'x\ny=z'))).toBe('a\\=b\\nc\\\\=x\\ny=z\n');
    expect(formatListItem('text', 'k', undefined)).toBe('k\n');
  });
  it('jsonl items are one line each', () => {
    expect(formatListItem('jsonl', 'k', entry('json', '[1,\n2]'))).toBe('["k",[1,2]]\n');
    expect(formatListItem('jsonl', 'k', undefined)).toBe('"k"\n');
  });
});
