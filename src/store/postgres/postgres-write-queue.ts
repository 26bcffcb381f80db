import type { OpOutcome, ResultOf, WriteOp } from '../core/write-ops.js';
import { type BatchBackend, type QueuedWrite, runBatch } from './postgres-batch.js';

/** A prefix delete whose listing is out of date by the time its batch reads the bucket. */
export const STALE_LISTING = Symbol('stale listing');

/**
 * Queues key writes for their bucket's next batch (postgres-batch.ts). A bucket has one batch
 * running at a time on this instance: the writes that arrive meanwhile (up to `batchSize`) form
 * the next, which is read, run in memory and written in one statement, each write with its own
 * revision, so revisions and the change log are exactly those of one transaction per write.
 * Across instances the bucket row's version (and, when it changed, its lock) orders batches; a
 * batch that waited for the lock takes in the writes queued meanwhile (runBatch's `more`).
 */
export class WriteQueue {
  /** Per bucket, writes waiting for a batch; the buckets with one running; how many run. */
  private readonly queues = new Map<string, QueuedWrite[]>();
  private readonly writing = new Set<string>();
  private running = 0;

  constructor(
    private readonly backend: BatchBackend,
    private readonly batchSize: number,
    /** Batches of different buckets at once, leaving part of the pool to reads. */
    private readonly inFlight: number,
  ) {}

  /** Runs `op` (which reads or writes `keys`) in its bucket's next batch. */
  write<O extends WriteOp>(bucket: string, op: O, keys: string[]): Promise<ResultOf<O> | typeof STALE_LISTING> {
    return new Promise<OpOutcome>((resolve, reject) => {
      const write: QueuedWrite = { op, keys, resolve, reject };
      const queue = this.queues.get(bucket);
      if (queue) queue.push(write);
      else this.queues.set(bucket, [write]);
      this.start();
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

  private start(): void {
    for (const [bucket, queue] of this.queues) {
      if (this.running >= this.inFlight) return;
      if (this.writing.has(bucket)) continue;
      const batch = queue.splice(0, this.batchSize);
      // An emptied queue goes; the bucket's next write queues at the back, behind other buckets.
      if (queue.length === 0) this.queues.delete(bucket);
      this.writing.add(bucket);
      this.running++;
      void runBatch(this.backend, bucket, batch, (room) => this.take(bucket, room), this.batchSize).finally(() => {
        this.writing.delete(bucket);
        this.running--;
        this.start();
      });
    }
  }
}
