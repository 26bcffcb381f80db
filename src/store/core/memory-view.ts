import { type EntryRow, isLive } from '../entry-row.js';
import type { Usage } from '../quota.js';
import { type Quota, NO_QUOTA } from '../quota.js';
import { applyBatch } from './apply-batch.js';
import type { OpOutcome, WriteOp } from './write-ops.js';
import type { BatchResult, ChangeRecord, WriteView } from './write-view.js';
import { compareKeys } from '../../values/key-order.js';

/** One bucket held in memory: what a WriteView reads, and what persisting a batch changes. */
export interface MemoryBucket {
  revision: number;
  usage: Usage;
  rows: Map<string, EntryRow>;
  /** Every change row persisted, in order. */
  changes: ChangeRecord[];
}

/** A WriteView over a bucket in memory (absent: no such bucket). */
export function memoryView(bucket: MemoryBucket | undefined): WriteView {
  return {
    revision: bucket?.revision,
    usage: () => ({ ...bucket!.usage }),
    row: (key) => bucket?.rows.get(key),
    liveKeys: (prefix, now, limit) =>
      [...(bucket?.rows ?? new Map<string, EntryRow>())]
        .filter(([key, row]) => key.startsWith(prefix) && isLive(row, now))
        .map(([key]) => key)
        .sort(compareKeys)
        .slice(0, limit),
  };
}

/** Persists what a batch did to the bucket, as an engine persists it to its tables. */
export function persistToMemory(bucket: MemoryBucket | undefined, result: BatchResult): void {
  if (!bucket || result.revision === undefined) return;
  bucket.revision = result.revision;
  bucket.usage.keys += result.usage.keys;
  bucket.usage.bytes += result.usage.bytes;
  for (const change of result.changes) {
    if (change.kind === 'set') {
      bucket.rows.set(change.key, {
        type: change.value!.type,
        value: change.value!.data,
        expires_at: change.expiresAt,
        revision: change.revision,
        create_revision: change.createRevision!,
      });
    } else bucket.rows.delete(change.key);
    bucket.changes.push(change);
  }
}

/** Buckets in memory written through the rules: the model the engines are tested against. */
export class MemoryBuckets {
  readonly buckets = new Map<string, MemoryBucket>();

  constructor(readonly quota: Quota = NO_QUOTA) {}

  createBucket(id: string): void {
    this.buckets.set(id, { revision: 0, usage: { keys: 0, bytes: 0 }, rows: new Map(), changes: [] });
  }

  /** Applies `ops` as one batch and persists it; one outcome per write. */
  write(bucket: string, ops: WriteOp[]): OpOutcome[] {
    const state = this.buckets.get(bucket);
    const result = applyBatch(memoryView(state), ops, this.quota);
    persistToMemory(state, result);
    return result.outcomes;
  }
}
