import type { OpOutcome, ResultOf, WriteOp } from '../core/write-ops.js';
import { type BatchBackend, type BucketBatch, type QueuedWrite, runBatches } from './postgres-batch.js';

/** A prefix delete whose listing is out of date by the time its batch reads the bucket. */
export const STALE_LISTING = Symbol('stale listing');

/**
 * Queues key writes for their bucket's next batch (postgres-batch.ts). A bucket is in one batch
 * at a time on this instance: its writes that arrive meanwhile go in a later one. A batch starts
 * after the turn of the event loop its first write arrived in, or when a running one ends, and
 * takes the queued writes (up to `batchSize` in all) of every bucket not already in one, and is read,
 * run in memory and written in one statement, one commit for all its buckets, each write with its
 * own revision, so revisions and the change log are exactly those of one transaction per write.
 * Across instances each bucket row's version (and, when it changed, its lock) orders batches; a
 * bucket that waited for the lock takes in its writes queued meanwhile (runBatches' `more`).
 */
export class WriteQueue {
  /** Per bucket, writes waiting for a batch; the buckets with one running; how many run. */
  private readonly queues = new Map<string, QueuedWrite[]>();
  private readonly writing = new Set<string>();
  private running = 0;
  private scheduled = false;

  constructor(
    private readonly backend: BatchBackend,
    private readonly batchSize: number,
    /** Batches at once, leaving part of the pool to reads. */
    private readonly inFlight: number,
  ) {}

  /** Runs `op` (which reads or writes `keys`) in its bucket's next batch. */
  write<O extends WriteOp>(bucket: string, op: O, keys: string[]): Promise<ResultOf<O> | typeof STALE_LISTING> {
    return new Promise<OpOutcome>((resolve, reject) => {
      const write: QueuedWrite = { op, keys, resolve, reject };
      const queue = this.queues.get(bucket);
      if (queue) queue.push(write);
      else this.queues.set(bucket, [write]);
      this.schedule();
    }).then((outcome) => {
      if (outcome.ok) return outcome.value as ResultOf<O>;
      if ('stale' in outcome) return STALE_LISTING;
      throw outcome.error;
    });
  }

  /** Up to `room` of the writes queued for `bucket`, for its running batch to take in. */
  private take(bucket: string, room: number): QueuedWrite[] {
    const queue = this.queues.get(bucket);
    if (!queue || room <= 0) return [];
    const taken = queue.splice(0, room);
    if (queue.length === 0) this.queues.delete(bucket);
    return taken;
  }

  /** Starts batches after the I/O callbacks of this turn: every request parsed in it has queued its write. */
  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.start();
    });
  }

  private start(): void {
    while (this.running < this.inFlight) {
      const batch = this.nextBatch();
      if (batch.length === 0) return;
      for (const { bucket } of batch) this.writing.add(bucket);
      this.running++;
      void runBatches(this.backend, batch, (bucket, room) => this.take(bucket, room), this.batchSize).finally(() => {
        for (const { bucket } of batch) this.writing.delete(bucket);
        this.running--;
        // The writes queued while it ran all arrived before now: they go at once.
        this.start();
      });
    }
  }

  /** The queued writes, up to `batchSize`, of the buckets not in a running batch, in the order the buckets queued. */
  private nextBatch(): BucketBatch[] {
    const batch: BucketBatch[] = [];
    let room = this.batchSize;
    for (const [bucket, queue] of this.queues) {
      if (room === 0) break;
      if (this.writing.has(bucket)) continue;
      const writes = queue.splice(0, room);
      room -= writes.length;
      // An emptied queue goes; the bucket's next write queues at the back, behind other buckets.
      if (queue.length === 0) this.queues.delete(bucket);
      batch.push({ bucket, writes });
    }
    return batch;
  }
}
