import { describe, expect, it } from 'vitest';
import { typeOfStream, typeOfText } from '../../src/values/cli-value.js';
import { jsonErrorAt } from '../../src/cli/commands/edit.js';
import { exitCodeRows, exitCodesHelp } from '../../src/cli/exit-codes.js';

describe('the one typing rule for CLI values', () => {
  it.each([
    ['42', 'int64'],
    ['-9223372036854775808', 'int64'],
    ['9223372036854775808', 'json'],
    ['123456789012345678901234567890', 'json'],
    ['2.5', 'float64'],
    ['1e3', 'float64'],
    ['007', 'text'],
    ['{"a":1}', 'json'],
    [' [1, 2]', 'json'],
    ['{oops', 'text'],
    ['true', 'text'],
    ['null', 'text'],
    ['"quoted"', 'text'],
    ['', 'text'],
    ['hello world', 'text'],
  ])('text %j is %s', (text, type) => {
    expect(typeOfText(text)).toBe(type);
  });

  it('stdin drops exactly one trailing newline (LF or CRLF) from UTF-8 and keeps other bytes exact', () => {
    expect(typeOfStream(Buffer.from('hello\n'))).toEqual({ type: 'text', data: Buffer.from('hello') });
    expect(typeOfStream(Buffer.from('hello\n\n'))).toEqual({ type: 'text', data: Buffer.from('hello\n') });
    expect(typeOfStream(Buffer.from('42\r\n'))).toEqual({ type: 'int64', data: Buffer.from('42') });
    expect(typeOfStream(Buffer.from('a\u0000\n'))).toEqual({ type: 'bytes', data: Buffer.from('a\u0000\n') });
    expect(typeOfStream(Buffer.from([0xc3, 0x0a]))).toEqual({ type: 'bytes', data: Buffer.from([0xc3, 0x0a]) });
    expect(typeOfStream(Buffer.alloc(0))).toEqual({ type: 'text', data: Buffer.alloc(0) });
  });
});

describe('kvb edit: where JSON breaks', () => {
  it('names the line and column as an editor counts them', () => {
    expect(jsonErrorAt('{\n  "a": 1\n  "b": 2\n}\n')).toMatch(/^line 3, column 3: /);
    expect(jsonErrorAt('{"a": ')).toMatch(/^line 1, column 7: /);
  });
});

describe('exit codes', () => {
  it('lists each code once, with the HTTP statuses of the ERRORS table in ascending order and no empty lists', () => {
    const rows = exitCodeRows();
    expect(rows.map((r) => r.code)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(rows.find((r) => r.code === 5)!.statuses).toEqual([429, 500, 503, 507]);
    expect(rows.find((r) => r.code === 6)!.statuses).toEqual([409, 412]);
    const help = exitCodesHelp();
    expect(help).not.toMatch(/\(\s*,/);
    for (const line of help.split('\n')) expect(line.length).toBeLessThanOrEqual(80);
  });
});
