import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { floorWithin } from '../floor-within.js';
import { PRUNE_OVERLAP_MS } from '../history-reader.js';
import { type ResultOf, type SweepOp, sweepsOf } from '../core/write-ops.js';
import { LEASE_MS } from './postgres-open.js';
import { withRetries } from './postgres-retries.js';
import type { StatementRunner } from './postgres-statement-runner.js';
import type { PostgresStatementName, PostgresStatements } from './postgres-statements.js';

/**
 * The background work of the PostgreSQL store: the expiry sweep, the change-log prune and the
 * history bound. Each runs under the `sweep` lease row, so one instance does it at a time (the
 * others would only wait on the same rows).
 */
export class PostgresMaintenance {
  /** This instance, as a lease holder. */
  private readonly holder = randomUUID();
  /** Changes committed before this were all looked at by an earlier prune of this instance (see `prunable`). */
  private prunedBefore = 0;
  /** Changes committed before this were all looked at by an earlier history bound of this instance (see `historyGrew`). */
  private boundedBefore = 0;

  constructor(
    private readonly runner: StatementRunner,
    private readonly sql: PostgresStatements,
    /** Runs a sweep write (the store's write queue). */
    private readonly sweep: (bucket: string, op: SweepOp) => Promise<ResultOf<SweepOp>>,
  ) {}

  private query<R extends pg.QueryResultRow>(name: PostgresStatementName, args: Record<string, unknown>, client?: pg.PoolClient) {
    return this.runner.run<R>(this.sql[name], args, client);
  }

  /** Takes or renews a named lease for this instance; false while another live instance holds it. */
  private async takeLease(name: string, now = Date.now()): Promise<boolean> {
    const { rows } = await withRetries(() => this.query('takeLease', { name, holder: this.holder, until: now + LEASE_MS, now }));
    return rows.length > 0;
  }

  async releaseLeases(): Promise<void> {
    await this.query('releaseLease', { name: 'sweep', holder: this.holder }).catch(() => {});
  }

  /**
   * Deletes up to `batch` expired keys: per bucket, one sweep write through the store's write
   * path (`sweep`), where the write rules decide which keys still expire.
   */
  async sweepExpired(now: number, batch: number): Promise<number> {
    if (!(await this.takeLease('sweep'))) return 0;
    const { rows } = await this.query<{ bucket_id: string; key: Buffer }>('expiredEntries', { now, batch });
    let deleted = 0;
    for (const { bucket, op } of sweepsOf(rows, now)) {
      const outcome = await this.sweep(bucket, op);
      if ('swept' in outcome) deleted += outcome.swept;
    }
    return deleted;
  }

  async pruneChanges(before: number, batch: number): Promise<number> {
    if (!(await this.takeLease('sweep'))) return 0;
    const { rows } = await this.query<{ bucket_id: string; revision: number }>('prunable', {
      before,
      since: Math.max(0, this.prunedBefore - PRUNE_OVERLAP_MS),
      batch,
    });
    for (const { bucket_id: bucket, revision } of rows) await this.compactTo(bucket, revision);
    if (rows.length < batch) this.prunedBefore = Math.max(this.prunedBefore, before);
    return rows.length;
  }

  /** Raises the bucket's floor to `revision` and compacts its log up to it, in one transaction. */
  private async compactTo(bucket: string, revision: number): Promise<void> {
    // The floor is raised first, in the same transaction: a reader never finds a hole without a floor above it.
    await this.runner.transaction(async (client) => {
      const floor = await this.query<{ changes_floor: number }>('changesFloor', { bucket }, client);
      await this.query('raiseFloor', { bucket, revision }, client);
      await this.query('compactChanges', { bucket, revision, floor: Number(floor.rows[0]?.changes_floor ?? 0) }, client);
      await this.query('pruneOperations', { bucket, revision }, client);
    });
  }

  async boundHistory(maxBytes: number, now: number): Promise<number> {
    if (maxBytes <= 0) return 0;
    if (!(await this.takeLease('sweep'))) return 0;
    const since = Math.max(0, this.boundedBefore - PRUNE_OVERLAP_MS);
    const { rows: grown } = await this.query<{ bucket_id: string }>('historyGrew', { since, batch: Number.MAX_SAFE_INTEGER });
    let count = 0;
    for (const { bucket_id: bucket } of grown) {
      const { rows: sizes } = await this.query<{ revision: number; bytes: number }>('historyBytes', { bucket });
      const floor = floorWithin(
        sizes.map((r) => ({ revision: Number(r.revision), bytes: Number(r.bytes) })),
        maxBytes,
      );
      if (floor === undefined) continue;
      await this.compactTo(bucket, floor);
      count++;
    }
    this.boundedBefore = Math.max(this.boundedBefore, now);
    return count;
  }
}
