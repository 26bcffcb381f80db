import type { EntryRow } from '../entry-row.js';

/** One coalesced statement's rows: `i` is the 1-based position of the read it answers. */
export type PointReadRow = EntryRow & { i: number };

/** Reads the rows of (bucket, key) pairs in one statement. */
export type ReadPoints = (buckets: string[], keys: Buffer[]) => Promise<PointReadRow[]>;

interface PendingRead {
  bucket: string;
  key: Buffer;
  resolve(row: EntryRow | undefined): void;
  reject(err: unknown): void;
}

/**
 * Most reads in one statement: its arrays stay small (128-byte keys) and one slow statement
 * delays no more than this many requests.
 */
const MAX_READS = 256;

/**
 * Point reads (GET, HEAD, a past read's present) coalesced: the reads that arrive in one turn of
 * the event loop go to PostgreSQL as one statement (`unnest` of their buckets and keys joined to
 * the entries), so 50 concurrent readers cost a few round trips instead of 50. A statement is
 * only ever sent after every read in it was asked for, and a read never shares an answer with a
 * statement sent before it arrived: each read sees every write acknowledged before its request
 * (read-your-writes across instances). At most `maxInFlight` statements run at once; reads that
 * arrive meanwhile gather for the next one, which is sent as soon as one finishes, like a group
 * commit. Errors reach every read of the statement (each request answers 503 on its own).
 */
export class PointReads {
  private pending: PendingRead[] = [];
  private scheduled = false;
  private inFlight = 0;

  constructor(
    private readonly readPoints: ReadPoints,
    private readonly maxInFlight: number,
  ) {}

  /** The key's row (expired ones too); undefined when absent. */
  read(bucket: string, key: Buffer): Promise<EntryRow | undefined> {
    return new Promise((resolve, reject) => {
      this.pending.push({ bucket, key, resolve, reject });
      if (this.scheduled) return;
      this.scheduled = true;
      // After the I/O callbacks of this turn: every request parsed in it has queued its read.
      setImmediate(() => {
        this.scheduled = false;
        this.flush();
      });
    });
  }

  private flush(): void {
    while (this.pending.length > 0 && this.inFlight < this.maxInFlight) {
      const reads = this.pending.length <= MAX_READS ? this.pending : this.pending.slice(0, MAX_READS);
      this.pending = reads === this.pending ? [] : this.pending.slice(MAX_READS);
      void this.send(reads);
    }
  }

  private async send(reads: PendingRead[]): Promise<void> {
    this.inFlight++;
    try {
      const rows = await this.readPoints(
        reads.map((r) => r.bucket),
        reads.map((r) => r.key),
      );
      const found: Array<EntryRow | undefined> = new Array(reads.length);
      for (const { i, ...row } of rows) found[Number(i) - 1] = row;
      for (const [n, r] of reads.entries()) r.resolve(found[n]);
    } catch (err) {
      for (const r of reads) r.reject(err);
    } finally {
      this.inFlight--;
      // The reads that gathered while this statement ran all arrived before now: send them.
      this.flush();
    }
  }
}
