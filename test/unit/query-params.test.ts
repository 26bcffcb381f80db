import { describe, expect, it } from 'vitest';
import { parseQuery } from '../../src/server/query-params.js';

const plain = (text: string) => ({ ...parseQuery(text) });

describe('query strings are decoded once, strictly', () => {
  it('decodes as Fastify did: repeats become arrays, + is a space, a bare name is empty', () => {
    expect(plain('')).toEqual({});
    expect(plain('a=1&b=x+y&a=2&a=3&flag&&c=%2B%25')).toEqual({ a: ['1', '2', '3'], b: 'x y', flag: '', c: '+%' });
    expect(plain('p=a%2Fb=c&%C3%A9=%E2%82%AC')).toEqual({ p: 'a/b=c', é: '€' });
  });

  it('keeps __proto__ as a parameter, not the prototype', () => {
    const query = parseQuery('__proto__=x&constructor=y');
    expect(Object.getPrototypeOf(Object.getPrototypeOf(query))).toBeNull();
    expect(Object.keys(query)).toEqual(['__proto__', 'constructor']);
  });

  it('drops a malformed parameter and marks the query, for checkQuery to refuse', () => {
    for (const text of ['prefix=%ZZ', 'prefix=%C0%AF', 'delimiter=%FF', 'x=%ED%A0%80', '%E0=1', 'a=1&b=%', 'c=%4']) {
      const query = parseQuery(text);
      expect(Object.getOwnPropertySymbols(query), text).toHaveLength(1);
    }
    expect(Object.getOwnPropertySymbols(parseQuery('prefix=%25C0%25AF'))).toHaveLength(0);
    expect(plain('prefix=%25C0%25AF')).toEqual({ prefix: '%C0%AF' });
  });
});
