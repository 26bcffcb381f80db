import type { Entry } from './store.js';

const ENTRY_OVERHEAD_BYTES = 120;

/**
 * A map bounded by entry count and bytes, in two generations instead of one map evicted
 * oldest-first: deleting from the front of a Map leaves slots V8 skips on every later
 * `keys().next()`, so each eviction got slower (11 µs per miss measured at 1M keys); here the old
 * generation is dropped whole when the young one fills, and a hit in the old one is copied to the
 * young one. `null` is a value (known absent); `undefined` means not held.
 */
export class Generations<V> {
  private young = new Map<string, V>();
  private old = new Map<string, V>();
  private youngBytes = 0;

  /** Each generation holds up to half of `maxEntries` and of `maxBytes` (as `bytes` counts a value, plus a per-entry overhead). */
  constructor(
    private readonly maxEntries: number,
    private readonly maxBytes: number,
    private readonly bytes: (value: V) => number,
  ) {}

  get(id: string): V | undefined {
    const young = this.young.get(id);
    if (young !== undefined) return young;
    const old = this.old.get(id);
    if (old !== undefined) this.set(id, old);
    return old;
  }

  set(id: string, value: V): void {
    const before = this.young.get(id);
    if (before !== undefined) this.youngBytes -= this.footprint(id, before);
    this.young.set(id, value);
    this.youngBytes += this.footprint(id, value);
    if (this.young.size * 2 >= this.maxEntries || this.youngBytes * 2 >= this.maxBytes) {
      this.old = this.young;
      this.young = new Map();
      this.youngBytes = 0;
    }
  }

  /** Forgets `id`; true when it was held. */
  delete(id: string): boolean {
    const young = this.young.get(id);
    if (young !== undefined) {
      this.youngBytes -= this.footprint(id, young);
      this.young.delete(id);
    }
    return this.old.delete(id) || young !== undefined;
  }

  clear(): void {
    this.young = new Map();
    this.old = new Map();
    this.youngBytes = 0;
  }

  /** Values held, both generations (one promoted from the old one counts twice until it is dropped). */
  get size(): number {
    return this.young.size + this.old.size;
  }

  private footprint(id: string, value: V): number {
    return ENTRY_OVERHEAD_BYTES + id.length * 2 + this.bytes(value);
  }
}

/**
 * A bounded read cache of entries (null: known absent), for a store that is the only writer of
 * its data (SQLite, whose server holds the file's sidecar lock: sqlite-lock.ts).
 *
 * A key is admitted only when it is hot: on its second miss within the last `seenMax` missed
 * keys. Filling on every miss made a server holding 1M keys under uniform random reads spend
 * its time churning the cache (0.57x its 10k-key throughput, against 1.00x with no cache), while
 * a hot set still settles in after one extra read per key.
 */
export class EntryCache {
  private readonly entries: Generations<Entry | null>;
  /** Keys missed recently, in two generations as well. */
  private seen = new Set<string>();
  private seenBefore = new Set<string>();

  /** `maxEntries` and `maxBytes` (value bytes plus a per-entry overhead) bound the entries held, as in Generations. */
  constructor(
    maxEntries: number,
    maxBytes: number,
    private readonly seenMax: number,
  ) {
    this.entries = new Generations(maxEntries, maxBytes, (entry) => (entry ? entry.data.length : 0));
  }

  static id(bucket: string, key: string): string {
    // Bucket ids never contain NUL, so the first NUL ends the bucket part.
    return `${bucket}\u0000${key}`;
  }

  get(id: string): Entry | null | undefined {
    return this.entries.get(id);
  }

  /** After a miss: caches what the database answered if the key was missed recently too. */
  admit(id: string, entry: Entry | null): void {
    if (this.seen.has(id) || this.seenBefore.has(id)) this.entries.set(id, entry);
    else this.remember(id);
  }

  /** A write changed the key: forgets it. A key that was cached is hot, so its next read caches it again. */
  invalidate(id: string): void {
    if (this.entries.delete(id)) this.remember(id);
  }

  clear(): void {
    this.entries.clear();
  }

  /** Entries held, both generations (a key promoted from the old one counts twice until it is dropped). */
  get size(): number {
    return this.entries.size;
  }

  private remember(id: string): void {
    this.seen.add(id);
    if (this.seen.size * 2 >= this.seenMax) {
      this.seenBefore = this.seen;
      this.seen = new Set();
    }
  }
}
