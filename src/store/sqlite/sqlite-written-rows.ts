import { Generations } from '../entry-cache.js';
import type { EntryRow } from '../entry-row.js';

/** Up to this many rows (and their values' bytes) are kept, as many as the request thread's entry cache holds. */
const KEPT_ROWS = 25_000;
const KEPT_ROW_BYTES = 16 * 1024 * 1024;

/**
 * The rows the SQLite writer thread wrote, as it committed them (null: absent), so that a write to
 * a key written before loads it without a SELECT: the writer is the file's only writer
 * (sqlite-lock.ts), so a committed row stays true until the writer itself changes it.
 *
 * The running batch's rows wait apart and join the kept ones only when the batch commits (they
 * may not be in the file yet: the writer writes them at the batch's end). A write's rows come
 * here only once it has succeeded, so none is ever taken back one write at a time: an import or
 * a bucket delete, which change rows without naming them, makes the batch read the file for every
 * key it has not written since and every kept row be forgotten; so does a batch that fails.
 */
export class WrittenRows {
  private readonly kept = new Generations<EntryRow | null>(KEPT_ROWS, KEPT_ROW_BYTES, (row) => (row ? row.value.length : 0));
  /** The running batch's rows. */
  private batch = new Map<string, EntryRow | null>();
  private unknown = false;

  /** The row as the running batch left it, known without the file; undefined: read the file. */
  get(id: string): EntryRow | null | undefined {
    const inBatch = this.batch.get(id);
    if (inBatch !== undefined) return inBatch;
    return this.unknown ? undefined : this.kept.get(id);
  }

  /** A write of the running batch set the row (null: removed the key). */
  wrote(id: string, row: EntryRow | null): void {
    const value = row && ownBytes(row.value);
    this.batch.set(id, row && value !== row.value ? { ...row, value: value! } : row);
  }

  /**
   * Rows changed that cannot be named (an import, a bucket delete), once the batch's rows so far
   * are in the file: read the file until the batch ends, and keep nothing of it.
   */
  forgetAll(): void {
    this.unknown = true;
    this.batch = new Map();
  }

  /** The batch ended: committed, its rows are kept; failed, everything is forgotten (the file rolled back). */
  endBatch(committed: boolean): void {
    if (this.unknown || !committed) this.kept.clear();
    else for (const [id, row] of this.batch) this.kept.set(id, row);
    this.batch = new Map();
    this.unknown = false;
  }
}

/**
 * `data`, or a copy when it is a small view of a larger buffer (a value that arrived in a message
 * may share one): a kept row must not hold more memory than its bytes count.
 */
function ownBytes(data: Buffer): Buffer {
  return data.buffer.byteLength > 2 * data.length + 64 ? Buffer.from(data) : data;
}
