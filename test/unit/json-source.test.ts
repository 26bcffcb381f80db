import { describe, expect, it } from 'vitest';
import { JsonLimitError, JsonSyntaxError, minifyJson, parseJsonSource } from '../../src/values/json-source.js';

describe('JSON with source text', () => {
  it('keeps the exact source of every value', () => {
    const root = parseJsonSource('{"txn": [ {"set":"a", "value": 12345678901234567890 }, {"value": 1.10} ]}');
    expect(root.kind).toBe('object');
    if (root.kind !== 'object') return;
    const list = root.entries[0]![1];
    if (list.kind !== 'array') throw new Error('expected array');
    const first = list.items[0]!;
    if (first.kind !== 'object') throw new Error('expected object');
    expect(first.entries.map(([k, v]) => [k, v.source])).toEqual([
      ['set', '"a"'],
      ['value', '12345678901234567890'],
    ]);
    const second = list.items[1]!;
    if (second.kind !== 'object') throw new Error('expected object');
    expect(second.entries[0]![1].source).toBe('1.10');
  });
  it('decodes strings', () => {
    const node = parseJsonSource('"a\\nb\\u00e9"');
    expect(node).toEqual({ kind: 'string', value: 'a\nbé', source: '"a\\nb\\u00e9"' });
  });
  it('accepts __proto__ as an ordinary member name', () => {
    const node = parseJsonSource('{"__proto__":1}');
    expect(node.kind === 'object' && node.entries[0]![0]).toBe('__proto__');
  });
  it.each(['', '{', '[1,]', '{"a" 1}', '01', 'nul', '"\\x"', '{"a":1} x', '"\u0001"', "'a'"])('%j is a syntax error', (text) => {
    expect(() => parseJsonSource(text)).toThrow(JsonSyntaxError);
  });
  it('refuses absurd nesting instead of overflowing the stack', () => {
    expect(() => parseJsonSource('['.repeat(10_000))).toThrow(JsonSyntaxError);
  });
  it('minifies without touching strings or numbers', () => {
    expect(minifyJson('{ "a b" : [ 1.10 ,\n "x\\" y" ] }')).toBe('{"a b":[1.10,"x\\" y"]}');
  });
  describe('limits: what a large body may make the parser build', () => {
    const limits = { collapseDepth: 1, maxValueLength: 10, maxMembers: [3] };
    it('keeps a container at the collapse depth as its source only', () => {
      const root = parseJsonSource('[[1, [2]], {"a":"b"}, "s"]', limits);
      if (root.kind !== 'array') throw new Error('expected array');
      expect(root.items.map((n) => [n.kind, n.source, 'collapsed' in n ? n.collapsed : false])).toEqual([
        ['array', '[1, [2]]', true],
        ['object', '{"a":"b"}', true],
        ['string', '"s"', false],
      ]);
      expect(root.items[0]!.kind === 'array' && root.items[0]!.items).toEqual([]);
    });
    it.each([
      ['a collapsed container longer than the limit', '[[1,2,3,4,5,6]]'],
      ['a container too long deep inside a collapsed one', '[[[[1,2,3,4,5,6]]]]'],
      ['a string whose decoded text is longer than the limit', '["abcdefghijk"]'],
      ['a number longer than the limit', '[12345678901]'],
      ['more members than allowed', '[1,2,3,4]'],
    ])('stops at %s', (_what, text) => {
      expect(() => parseJsonSource(text, limits)).toThrow(JsonLimitError);
    });
    it('counts an escape as the one character it decodes to', () => {
      expect(parseJsonSource('["\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9"]', limits).kind).toBe('array');
    });
    it('still finds syntax errors inside a collapsed value', () => {
      expect(() => parseJsonSource('[[1,]]', limits)).toThrow(JsonSyntaxError);
      expect(() => parseJsonSource('[{"a" 1}]', limits)).toThrow(JsonSyntaxError);
    });
  });
});
