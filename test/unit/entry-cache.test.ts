import { describe, expect, it } from 'vitest';
import { EntryCache } from '../../src/store/entry-cache.js';
import type { Entry } from '../../src/store/store.js';

const entry = (text: string): Entry => ({ type: 'text', data: Buffer.from(text), expiresAt: null, revision: 1 });

describe('entry cache: admission of hot keys only', () => {
  it('a key missed once is not cached; missed again, it is', () => {
    const cache = new EntryCache(100, 1 << 20, 100);
    const e = entry('v');
    cache.admit('a', e);
    expect(cache.get('a')).toBeUndefined();
    cache.admit('a', e);
    expect(cache.get('a')).toBe(e);
  });

  it('known absence (null) is cached like an entry', () => {
    const cache = new EntryCache(100, 1 << 20, 100);
    cache.admit('gone', null);
    cache.admit('gone', null);
    expect(cache.get('gone')).toBeNull();
  });

  it('keys read once each, more of them than the window of missed keys holds, never get in', () => {
    const cache = new EntryCache(100, 1 << 20, 10);
    for (let round = 0; round < 2; round++) for (let i = 0; i < 50; i++) cache.admit(`k${i}`, entry('v'));
    expect(cache.size).toBe(0);
  });

  it('a write forgets the key, and a key that was cached is cached again on its next miss', () => {
    const cache = new EntryCache(100, 1 << 20, 100);
    cache.admit('a', entry('1'));
    cache.admit('a', entry('1'));
    cache.invalidate('a');
    expect(cache.get('a')).toBeUndefined();
    const fresh = entry('2');
    cache.admit('a', fresh);
    expect(cache.get('a')).toBe(fresh);
  });
});

describe('entry cache: bounds', () => {
  it('holds at most maxEntries: the old generation is dropped whole when the young one fills', () => {
    const cache = new EntryCache(10, 1 << 20, 1000);
    for (let i = 0; i < 100; i++) {
      cache.admit(`k${i}`, entry('v'));
      cache.admit(`k${i}`, entry('v'));
      expect(cache.size).toBeLessThanOrEqual(10);
    }
    expect(cache.get('k99')).toBeDefined();
    expect(cache.get('k0')).toBeUndefined();
  });

  it('a hit in the old generation keeps the key through the next turnover', () => {
    const cache = new EntryCache(4, 1 << 20, 1000);
    const hot = entry('hot');
    const fill = (name: string) => {
      cache.admit(name, entry('v'));
      cache.admit(name, entry('v'));
    };
    fill('hot');
    cache.admit('hot', hot);
    fill('x1'); // young (hot, x1) is full: it becomes the old generation
    expect(cache.get('hot')).toBe(hot); // copied into the young generation
    fill('x2'); // turnover: the old generation (hot, x1) is dropped, hot survives in the new old one
    expect(cache.get('hot')).toBe(hot);
    expect(cache.get('x1')).toBeUndefined();
  });

  it('holds at most maxBytes of values (plus per-entry overhead)', () => {
    const cache = new EntryCache(1000, 4096, 1000);
    const big = entry('x'.repeat(1000));
    for (let i = 0; i < 20; i++) {
      cache.admit(`k${i}`, big);
      cache.admit(`k${i}`, big);
    }
    expect(cache.size).toBeLessThanOrEqual(4);
  });
});
