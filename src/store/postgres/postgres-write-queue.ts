import type { OpOutcome, ResultOf, WriteOp } from '../core/write-ops.js';
import { type BatchBackend, type BucketBatch, type QueuedWrite, runBatches } from './postgres-batch.js';

/**
 * How long a bucket whose batch lost its optimistic try to another instance goes straight to its
 * row's lock: while two instances write one bucket, nearly every try loses, after waiting for the
 * other's lock. Past it, a try again finds out whether the other still writes.
 */
export const CONTENDED_MS = 1000;

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
 * bucket that waited for the lock takes in its writes queued meanwhile (runBatches' `more`), and
 * for CONTENDED_MS after it lost a try its batches take the lock first.
 */
export class WriteQueue {
  /** Per bucket, writes waiting for a batch; the buckets with one running; how many run. */
  private readonly queues = new Map<string, QueuedWrite[]>();
  private readonly writing = new Set<string>();
  private running = 0;
  /** Buckets another instance writes too, and until when their batches take the row's lock first. */
  private readonly contended = new Map<string, number>();
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
      const more = (bucket: string, room: number) => this.take(bucket, room);
      void runBatches(this.backend, batch, more, this.batchSize, this.lockFirst(batch))
        .then((lost) => {
          const now = Date.now();
          for (const bucket of lost) this.contended.set(bucket, now + CONTENDED_MS);
          if (this.contended.size > 1024) for (const [bucket, until] of this.contended) if (until <= now) this.contended.delete(bucket);
        })
        .finally(() => {
          for (const { bucket } of batch) this.writing.delete(bucket);
          this.running--;
          // The writes queued while it ran all arrived before now: they go at once.
          this.start();
        });
    }
  }

  /** The batch's buckets still contended (forgetting those whose time is up). */
  private lockFirst(batch: BucketBatch[]): Set<string> {
    const now = Date.now();
    const first = new Set<string>();
    for (const { bucket } of batch) {
      const until = this.contended.get(bucket);
      if (until === undefined) continue;
      if (until > now) first.add(bucket);
      else this.contended.delete(bucket);
    }
    return first;
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
