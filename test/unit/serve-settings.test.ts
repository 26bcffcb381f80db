import { describe, expect, it } from 'vitest';
import { parseDbTarget } from '../../src/store/open-store.js';
import { parseBooleanSetting } from '../../src/values/boolean-setting.js';

describe('boolean settings: one parser for every boolean environment variable', () => {
  it.each(['1', 'true', 'TRUE', 'yes', 'Yes', 'on', ' ON '])('%j is true', (value) => expect(parseBooleanSetting('X', value)).toBe(true));
  it.each(['0', 'false', 'False', 'no', 'NO', 'off', 'Off'])('%j is false', (value) => expect(parseBooleanSetting('X', value)).toBe(false));
  it.each(['', 'maybe', '2', 'y', 'enabled'])('%j is refused, naming the variable', (value) =>
    expect(() => parseBooleanSetting('KVB_X', value)).toThrow(
      `KVB_X must be one of 1/0, true/false, yes/no, on/off, not ${JSON.stringify(value)}`,
    ),
  );
});

describe('--db targets', () => {
  it.each([
    ['./kvb.db', { kind: 'sqlite', path: './kvb.db' }],
    ['/var/lib/kvb/kvb.db', { kind: 'sqlite', path: '/var/lib/kvb/kvb.db' }],
    [':memory:', { kind: 'sqlite', path: ':memory:' }],
    ['sqlite:data/kvb.db', { kind: 'sqlite', path: 'data/kvb.db' }],
    ['sqlite:///var/kvb.db', { kind: 'sqlite', path: '/var/kvb.db' }],
    ['file:/var/kvb.db', { kind: 'sqlite', path: '/var/kvb.db' }],
    ['file:///var/kvb.db', { kind: 'sqlite', path: '/var/kvb.db' }],
    ['postgres://u:p@h/db', { kind: 'postgres', url: 'postgres://u:p@h/db' }],
    ['postgresql://h/db', { kind: 'postgres', url: 'postgresql://h/db' }],
  ])('%s', (value, target) => expect(parseDbTarget(value)).toEqual(target));

  it.each(['mysql://x', 'http://h/db', 'redis:x', 'sqlite:', ''])('%j is refused', (value) => expect(() => parseDbTarget(value)).toThrow());
});
