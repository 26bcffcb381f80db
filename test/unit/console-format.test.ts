import { describe, expect, it } from 'vitest';
import {
  type Row,
  applyChange,
  breadcrumbs,
  compareKeys,
  curlCommand,
  encodeValue,
  foldRows,
  actorLabel,
  formatSize,
  fromBase64,
  prettyJson,
  relativeExpiry,
  removeRow,
  toBase64,
  toHex,
  tokenClaims,
} from '../../console/src/format.js';

const text = (c: ReturnType<typeof encodeValue>) => (c.ok ? new TextDecoder().decode(c.bytes) : `error: ${c.error}`);

describe('console: value display and checks', () => {
  it('relative expiry names the largest whole unit', () => {
    const now = 1_000_000;
    expect(relativeExpiry(now + 6 * 86400_000 + 5000, now)).toBe('in 6 d');
    expect(relativeExpiry(now + 3 * 3600_000, now)).toBe('in 3 h');
    expect(relativeExpiry(now + 59 * 60_000 + 59_000, now)).toBe('in 59 min');
    expect(relativeExpiry(now + 40_000, now)).toBe('in 40 s');
    expect(relativeExpiry(now - 1, now)).toBe('expired');
  });

  it('sizes, hex and base64', () => {
    expect([formatSize(0), formatSize(1023), formatSize(1536), formatSize(16384)]).toEqual(['0 B', '1023 B', '1.5 KiB', '16 KiB']);
    const bytes = Uint8Array.from({ length: 18 }, (_, i) => i * 15);
    expect(toHex(bytes)).toBe('00000000  00 0f 1e 2d 3c 4b 5a 69 78 87 96 a5 b4 c3 d2 e1\n00000010  f0 ff');
    expect(toBase64(bytes)).toBe(Buffer.from(bytes).toString('base64'));
    expect([...fromBase64(' AAEC\n/v8= ')!]).toEqual([0, 1, 2, 254, 255]);
    expect(fromBase64('not base64!')).toBeUndefined();
  });

  it('JSON is indented for display only; invalid JSON is shown as it is', () => {
    expect(prettyJson('{"a":[1,2]}')).toBe('{\n  "a": [\n    1,\n    2\n  ]\n}');
    expect(prettyJson('{oops')).toBe('{oops');
    expect(prettyJson(' { "s" : "a,b:{\\"c\\"}" , "e" : { } , "l" : [ ] } ')).toBe('{\n  "s": "a,b:{\\"c\\"}",\n  "e": {},\n  "l": []\n}');
  });

  it('JSON is shown with its numbers as stored: no rounding past 2^53, 1.50 stays 1.50', () => {
    expect(prettyJson('99999999999999999999')).toBe('99999999999999999999');
    expect(prettyJson('{"id":12345678901234567890,"x":[1.50,-0,1e400]}')).toBe(
      '{\n  "id": 12345678901234567890,\n  "x": [\n    1.50,\n    -0,\n    1e400\n  ]\n}',
    );
    // As JSON.stringify indents, for JSON whose numbers are already short.
    const doc = '{"a":[1,{"b":null,"c":true}],"d":"x"}';
    expect(prettyJson(doc)).toBe(JSON.stringify(JSON.parse(doc), null, 2));
  });

  it('checks a value against its type before saving, keeping JSON bytes as typed', () => {
    expect(text(encodeValue('json', '{"a": 1,  "b": 2}'))).toBe('{"a": 1,  "b": 2}');
    expect(text(encodeValue('json', '{"a":'))).toMatch(/^error: Not valid JSON/);
    expect(text(encodeValue('text', '  anything  '))).toBe('  anything  ');
    expect(text(encodeValue('int64', ' -42 '))).toBe('-42');
    expect(text(encodeValue('int64', '9223372036854775807'))).toBe('9223372036854775807');
    expect(text(encodeValue('int64', '9223372036854775808'))).toBe('error: Outside the 64-bit integer range');
    expect(text(encodeValue('int64', '1.5'))).toBe('error: Not an integer');
    expect(text(encodeValue('float64', '2'))).toBe('2.0');
    expect(text(encodeValue('float64', '-1.5e3'))).toBe('-1500.0');
    expect(text(encodeValue('float64', '+.25'))).toBe('0.25');
    expect(text(encodeValue('float64', '1e21'))).toBe('1e+21');
    expect(text(encodeValue('int64', '+007'))).toBe('7');
    expect(text(encodeValue('float64', 'NaN'))).toBe('error: Not a finite number');
    expect(text(encodeValue('float64', '1e400'))).toBe('error: Not a finite number');
    expect(encodeValue('bytes', 'AAEC')).toEqual({ ok: true, bytes: Uint8Array.from([0, 1, 2]) });
    expect(text(encodeValue('bytes', '***'))).toBe('error: Not base64');
  });
});

describe('console: browsing', () => {
  it('folds sorted keys into folders at the next slash, across pages', () => {
    const first = foldRows(['a', 'b/1', 'b/2', 'c/x/1'], '', true, undefined);
    expect(first).toEqual([
      { kind: 'key', key: 'a' },
      { kind: 'folder', name: 'b/', prefix: 'b/' },
      { kind: 'folder', name: 'c/', prefix: 'c/' },
    ]);
    // The next page continues folder c/ without repeating it.
    expect(foldRows(['c/y', 'd'], '', true, first[first.length - 1])).toEqual([{ kind: 'key', key: 'd' }]);
    expect(foldRows(['c/x/1', 'c/y'], 'c/', true, undefined)).toEqual([
      { kind: 'folder', name: 'x/', prefix: 'c/x/' },
      { kind: 'key', key: 'c/y' },
    ]);
    // A prefix that ends mid-name names folders from its last slash.
    expect(foldRows(['notes/a'], 'no', true, undefined)).toEqual([{ kind: 'folder', name: 'notes/', prefix: 'notes/' }]);
    expect(foldRows(['b/1', 'b/2'], '', false, undefined)).toEqual([
      { kind: 'key', key: 'b/1' },
      { kind: 'key', key: 'b/2' },
    ]);
  });

  it('breadcrumbs split a prefix at each slash', () => {
    expect(breadcrumbs('')).toEqual([]);
    expect(breadcrumbs('a/b/c')).toEqual([
      { label: 'a/', prefix: 'a/' },
      { label: 'b/', prefix: 'a/b/' },
      { label: 'c', prefix: 'a/b/c' },
    ]);
  });

  it('copy as curl quotes the URL for the shell and never includes the credential', () => {
    expect(curlCommand('http://h:8080/api/v1', 'b-1', "it's/a key")).toBe(
      `curl -H "Authorization: Bearer $KVB_CREDENTIAL" 'http://h:8080/api/v1/b-1/it'\\''s%2Fa%20key'`,
    );
  });

  it("reads a token's prefix and permissions from its claims; anything else is not a token", () => {
    const payload = Buffer.from(JSON.stringify({ bkt: 'b', pfx: 'users/', perm: ['read'], gen: 0, exp: 2000 })).toString('base64url');
    expect(tokenClaims(`eyJhbGciOiJIUzI1NiJ9.${payload}.sig`)).toEqual({ prefix: 'users/', permissions: ['read'], expiresAt: 2_000_000 });
    expect(tokenClaims('a-secret-key')).toBeUndefined();
    expect(tokenClaims('a.b.c')).toBeUndefined();
  });
});

describe('console: live changes applied to the loaded rows', () => {
  const keys = (...names: string[]): Row[] => names.map((key) => ({ kind: 'key', key }));
  it('compares keys in UTF-8 byte order, as the server sorts them', () => {
    // U+FF5E (3 bytes, EF BD 9E) sorts after U+1F600 (4 bytes, F0 ...) in UTF-16, before it in UTF-8.
    expect(['😀', '～', 'a', 'ab', ''].sort(compareKeys)).toEqual(['', 'a', 'ab', '～', '😀']);
  });
  it('a set places a new key in order; a known key stays where it is; a delete removes it', () => {
    const rows = keys('a', 'c');
    expect(applyChange(rows, 'b', 'set', '', false, true)).toEqual(keys('a', 'b', 'c'));
    expect(applyChange(rows, 'c', 'set', '', false, true)).toBe(rows);
    expect(applyChange(rows, 'a', 'delete', '', false, true)).toEqual(keys('c'));
    expect(applyChange(rows, 'x', 'delete', '', false, true)).toBe(rows);
  });
  it('a key past the last loaded row waits for its page while more pages follow', () => {
    const rows = keys('a', 'c');
    expect(applyChange(rows, 'd', 'set', '', false, false)).toBe(rows);
    expect(applyChange(rows, 'd', 'set', '', false, true)).toEqual(keys('a', 'c', 'd'));
    expect(applyChange(rows, 'b', 'set', '', false, false)).toEqual(keys('a', 'b', 'c'));
  });
  it('in the folder view a key in a folder shows as its folder, once; deleting it leaves the folder', () => {
    const rows: Row[] = [
      { kind: 'key', key: 'p/a' },
      { kind: 'folder', name: 'f/', prefix: 'p/f/' },
    ];
    expect(applyChange(rows, 'p/f/new', 'set', 'p/', true, true)).toBe(rows);
    expect(applyChange(rows, 'p/e/x', 'set', 'p/', true, true)).toEqual([rows[0], { kind: 'folder', name: 'e/', prefix: 'p/e/' }, rows[1]]);
    expect(applyChange(rows, 'p/f/new', 'delete', 'p/', true, true)).toBe(rows);
  });
  it('removeRow takes away a folder (by its prefix) or a key, and leaves the rows alone when it is not there', () => {
    const rows: Row[] = [
      { kind: 'key', key: 'p/a' },
      { kind: 'folder', name: 'f/', prefix: 'p/f/' },
      { kind: 'key', key: 'p/g' },
    ];
    expect(removeRow(rows, 'p/f/')).toEqual([rows[0], rows[2]]);
    expect(removeRow(rows, 'p/a')).toEqual([rows[1], rows[2]]);
    expect(removeRow(rows, 'p/zz')).toBe(rows);
  });
});

describe("a history version's actor", () => {
  it('names the credential kind (a token by its id) and the address; nothing for changes recorded before actors', () => {
    expect(actorLabel({ kind: 'secret', token_id: null, address: '127.0.0.1' })).toBe('secret key from 127.0.0.1');
    expect(actorLabel({ kind: 'token', token_id: 'Xq3v9LrT0aBc', address: '203.0.113.7' })).toBe('token Xq3v9LrT0aBc from 203.0.113.7');
    expect(actorLabel({ kind: 'token', token_id: null, address: '::1' })).toBe('a token from ::1');
    expect(actorLabel({ kind: 'anonymous', token_id: null, address: '10.0.0.2' })).toBe('anonymous from 10.0.0.2');
    expect(actorLabel({ kind: 'server', token_id: null, address: null })).toBe('the server (expiry)');
    expect(actorLabel(null)).toBeUndefined();
  });
});
