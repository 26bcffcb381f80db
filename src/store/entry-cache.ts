/** A stored row as the cache keeps it: null means "known absent". */
export interface CachedRow {
  type: string;
  value: Buffer;
  expires_at: number | null;
}

const ROW_OVERHEAD_BYTES = 120;

/**
 * A bounded read cache of entries, for a store that is the only writer of its data (SQLite held
 * with an exclusive lock). Evicts in insertion order once over its entry or byte budget.
 */
export class EntryCache {
  private readonly rows = new Map<string, CachedRow | null>();
  private bytes = 0;

  constructor(
    private readonly maxEntries: number,
    private readonly maxBytes: number,
  ) {}

  static id(bucket: string, key: string): string {
    // Bucket ids never contain NUL, so the first NUL ends the bucket part.
    return `${bucket}\u0000${key}`;
  }

  get(id: string): CachedRow | null | undefined {
    return this.rows.get(id);
  }

  set(id: string, row: CachedRow | null): void {
    this.delete(id);
    this.rows.set(id, row);
    this.bytes += size(id, row);
    while (this.rows.size > this.maxEntries || this.bytes > this.maxBytes) {
      const oldest = this.rows.keys().next();
      if (oldest.done) break;
      this.delete(oldest.value);
    }
  }

  delete(id: string): void {
    const old = this.rows.get(id);
    if (old === undefined) return;
    this.bytes -= size(id, old);
    this.rows.delete(id);
  }

  clear(): void {
    this.rows.clear();
    this.bytes = 0;
  }

  get size(): number {
    return this.rows.size;
  }
}

function size(id: string, row: CachedRow | null): number {
  return ROW_OVERHEAD_BYTES + id.length * 2 + (row ? row.value.length : 0);
}
