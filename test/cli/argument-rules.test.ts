import { describe, expect, it } from 'vitest';
import { changesFrom } from '../../src/cli/commands/bucket.js';
import { normaliseDelta } from '../../src/cli/commands/incr.js';
import { typedBody } from '../../src/cli/commands/set.js';
import { checkOperation, flagOperations, txnBody } from '../../src/cli/commands/txn.js';

/** The pure rules behind the commands' arguments (the end-to-end files run them for real). */

const bodyOf = async (value: string, type: Parameters<typeof typedBody>[1]) => (await typedBody(Buffer.from(value), type)).body.toString();

describe('set --type', () => {
  it('float sends the server number grammar: integers gain .0, even beyond Int64', async () => {
    expect(await bodyOf('3', 'float')).toBe('3.0');
    expect(await bodyOf('-7', 'float')).toBe('-7.0');
    expect(await bodyOf('0.1', 'float')).toBe('0.1');
    expect(await bodyOf('1e21', 'float')).toBe('1e+21');
    expect(await bodyOf('12345678901234567890', 'float')).toBe('12345678901234567000.0');
    expect(await bodyOf('3\n', 'float')).toBe('3.0');
  });

  it('float refuses what is not a finite number', async () => {
    for (const bad of ['abc', '1e400', 'NaN', '+3', '0x10', '']) {
      await expect(typedBody(Buffer.from(bad), 'float'), bad).rejects.toThrow(/is not a finite number/);
    }
  });

  it('int accepts Int64 only', async () => {
    expect(await bodyOf('-9223372036854775808', 'int')).toBe('-9223372036854775808');
    for (const bad of ['3.0', '9223372036854775808', '1e3', 'x']) {
      await expect(typedBody(Buffer.from(bad), 'int'), bad).rejects.toThrow(/is not a 64-bit integer/);
    }
  });

  it('json, text and bytes keep the bytes and name their Content-Type; no type sends none', async () => {
    expect(await typedBody(Buffer.from('x'), 'bytes')).toEqual({ body: Buffer.from('x'), contentType: 'application/octet-stream' });
    expect((await typedBody(Buffer.from('x'), 'text')).contentType).toBe('text/plain; charset=utf-8');
    expect((await typedBody(Buffer.from('1'), 'json')).contentType).toBe('application/json');
    expect(await typedBody(Buffer.from('1'), undefined)).toEqual({ body: Buffer.from('1') });
  });
});

describe('incr delta', () => {
  it('an unsigned number means +, a signed one is kept, anything else is refused', () => {
    expect(normaliseDelta('5')).toBe('+5');
    expect(normaliseDelta('-1')).toBe('-1');
    expect(normaliseDelta('+2.5')).toBe('+2.5');
    expect(normaliseDelta('1e3')).toBe('+1e3');
    for (const bad of ['', 'x', '--1', '+-1', '1.', 'Infinity']) expect(() => normaliseDelta(bad), bad).toThrow(/delta must be a number/);
  });
});

describe('txn input', () => {
  it('a {"txn":[…]} document is sent exactly as written', () => {
    const doc = '{"txn": [{"set": "a", "value": 1.10}]}';
    expect(txnBody(`  ${doc}\n`)).toBe(doc);
  });

  it('JSONL lines (blank ones skipped) and a bare array become one document, values untouched', () => {
    expect(txnBody('{"set":"a","value":1.10}\n\n{"delete":"b"}\n')).toBe('{"txn":[{"set":"a","value":1.10},{"delete":"b"}]}');
    expect(txnBody('[{"delete":"b"}]')).toBe('{"txn":[{"delete":"b"}]}');
    expect(() => txnBody('{"set":"a"}\n{oops}')).toThrow('line 2 is not valid JSON');
    expect(() => txnBody(' \n')).toThrow('empty');
  });

  it('--set k=v is typed as kvb set types an argument (numbers name their type); --ttl applies to every set', () => {
    expect(
      flagOperations({
        check: [],
        set: ['n=5', 'f=1.5', 'big=123456789012345678901', 's=hi', 'o={"a":1}', 'z=null', 't=true', 'e=', 'eq=a=b'],
        del: ['d'],
        ttl: 9,
      }),
    ).toEqual([
      '{"set":"n","value":"5","type":"int64","ttl":9}',
      '{"set":"f","value":1.5,"type":"float64","ttl":9}',
      '{"set":"big","value":123456789012345678901,"ttl":9}',
      '{"set":"s","value":"hi","ttl":9}',
      '{"set":"o","value":{"a":1},"ttl":9}',
      '{"set":"z","value":"null","ttl":9}',
      '{"set":"t","value":"true","ttl":9}',
      '{"set":"e","value":"","ttl":9}',
      '{"set":"eq","value":"a=b","ttl":9}',
      '{"delete":"d"}',
    ]);
    expect(() => flagOperations({ check: [], set: ['novalue'], del: [] })).toThrow('KEY=VALUE');
  });

  it('--check KEY@REV, KEY:present and KEY:absent become check operations placed first; the last @ or : decides', () => {
    expect(flagOperations({ check: ['a@12', 'user@example.com@3', 'lock:absent', 'x:y:present'], set: ['b=1'], del: [] })).toEqual([
      '{"check":"a","rev":12}',
      '{"check":"user@example.com","rev":3}',
      '{"check":"lock","exists":false}',
      '{"check":"x:y","exists":true}',
      '{"set":"b","value":"1","type":"int64"}',
    ]);
    for (const bad of ['a', 'a@', '@3', 'a@-1', 'a@1.5', 'a:maybe', ':absent']) {
      expect(() => checkOperation(bad), bad).toThrow('--check takes KEY@REVISION');
    }
  });
});

describe('bucket update flags', () => {
  it('become one PATCH body: strings set, clear flags send null, rotation generates a key', () => {
    expect(changesFrom({ readKey: 'r', clearWriteKey: true, defaultTtl: 0 }).changes).toEqual({
      read_key: 'r',
      write_key: null,
      default_ttl: 0,
    });
    const rotated = changesFrom({ rotateSigningKey: true });
    expect(rotated.rotatedSigningKey).toMatch(/^[A-Za-z0-9_][A-Za-z0-9_-]{42}$/);
    expect(rotated.changes).toEqual({ signing_key: rotated.rotatedSigningKey });
  });

  it('refuses nothing to do and contradictions', () => {
    expect(() => changesFrom({})).toThrow('nothing to update');
    expect(() => changesFrom({ readKey: 'r', clearReadKey: true })).toThrow('contradict');
    expect(() => changesFrom({ rotateSigningKey: true, signingKey: 'k' })).toThrow('--rotate-signing-key');
  });
});
