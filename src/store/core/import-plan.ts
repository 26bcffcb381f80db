/**
 * An import's rules, once for both engines: which revision a staged import (or a `kvb db restore`)
 * commits at, and which statements it runs, in which order, with which parameters. Pure: the plan
 * is data; each engine runs its steps with its own connection (SQLite's bulk copy stays one
 * statement on the attached staging database; PostgreSQL's on its import transaction).
 */
import { prefixUpperBound } from '../../values/keys.js';
import { actorFields } from '../change-row.js';
import type { Actor } from '../history-types.js';
import { type Quota, type Usage, checkQuota } from '../quota.js';
import { NO_BUCKET } from './apply-batch.js';

/** What an import was asked to do (ImportStaging.apply's options), for which bucket, at which commit time. */
export interface ImportRequest {
  bucket: string;
  /** Every key under `prefix` that the import does not carry is deleted. */
  replace: boolean;
  prefix: string;
  /** A restore: entries keep their staged revisions and the bucket's revision becomes this one. */
  restoreRevision?: number;
  actor?: Actor;
  now: number;
}

/** The statements an import runs: the same names on both engines (statements.ts, history-statements.ts). */
export type ImportStatementName =
  | 'logStaged'
  | 'logStagedKeepRevisions'
  | 'logCleared'
  | 'logClearedUpper'
  | 'clearRange'
  | 'clearRangeUpper'
  | 'copyStaged'
  | 'copyStagedKeepRevisions'
  | 'recountUsage'
  | 'raiseWatchFloor'
  | 'logOperation';

/** One step of an import, run in order inside the import's transaction. */
export type ImportStep =
  /** The bucket's revision goes up by one. On PostgreSQL this is the bucket row's lock, taken first like any write's. */
  | { step: 'bump' }
  /** A restore: the bucket's revision is set to the restored one. */
  | { step: 'setRevision'; revision: number }
  /** One statement with its named parameters; `staged`: it reads the staging table. */
  | { step: 'statement'; name: ImportStatementName; args: Record<string, unknown>; staged: boolean }
  /** The recounted usage held to the quota against the usage before the import's statements (`checkImportQuota`). */
  | { step: 'checkQuota' }
  /** History starts at `revision`: the floor rises to it and the log is compacted up to it from `floor`. */
  | { step: 'compact'; revision: number; floor: number };

/** The revision an import commits at and its steps. */
export interface ImportPlan {
  revision: number;
  steps: ImportStep[];
}

/**
 * Plans an import into a bucket whose revision is `current` (undefined: the bucket is gone, and
 * nothing is written).
 */
export function planImport(request: ImportRequest, current: number | undefined): ImportPlan | typeof NO_BUCKET {
  if (current === undefined) return NO_BUCKET;
  const { bucket, replace, prefix, restoreRevision, actor, now } = request;
  const restore = restoreRevision !== undefined;
  const revision = restoreRevision ?? current + 1;
  const who = actorFields(actor);
  const statement = (name: ImportStatementName, args: Record<string, unknown>, staged = false): ImportStep => ({
    step: 'statement',
    name,
    args,
    staged,
  });
  // Every import bumps (on PostgreSQL the bump is the row lock that orders it with the bucket's
  // other writers); a restore then sets the revision it restores.
  const steps: ImportStep[] = [{ step: 'bump' }];
  if (restore) steps.push({ step: 'setRevision', revision });
  // History: the import's keys (a restore's at their own revisions), and the keys it removes, as of its revision.
  steps.push(
    restore
      ? statement('logStagedKeepRevisions', { bucket, now, ...who }, true)
      : statement('logStaged', { bucket, revision, now, ...who }, true),
  );
  if (replace) {
    const prefixBytes = Buffer.from(prefix);
    const upper = prefix ? prefixUpperBound(prefixBytes) : undefined;
    if (upper) {
      steps.push(statement('logClearedUpper', { bucket, revision, now, prefix: prefixBytes, upper, ...who }, true));
      steps.push(statement('clearRangeUpper', { bucket, prefix: prefixBytes, upper }));
    } else {
      steps.push(statement('logCleared', { bucket, revision, now, prefix: prefixBytes, ...who }, true));
      steps.push(statement('clearRange', { bucket, prefix: prefixBytes }));
    }
  }
  steps.push(restore ? statement('copyStagedKeepRevisions', { bucket }, true) : statement('copyStaged', { bucket, revision, now }, true));
  // Millions of rows in one statement: the usage is counted again rather than tracked per row, then held to the quota as a whole.
  steps.push(statement('recountUsage', { bucket }), { step: 'checkQuota' });
  // Watchers behind an import (one revision of up to millions of keys) get `reset`. History
  // keeps what the import did not touch: only a restore (the whole bucket, the operator's
  // `kvb db restore`) starts history at its revision; an import's keys are logged above.
  steps.push(restore ? { step: 'compact', revision, floor: -1 } : statement('raiseWatchFloor', { bucket, revision }));
  steps.push(statement('logOperation', { bucket, revision, operation: 'import', now }));
  return { revision, steps };
}

/**
 * Refuses (507) an import that takes its bucket over its quota, counted as a whole: the usage
 * before it against the usage it recounted. Only growth is refused, as for any write.
 */
export function checkImportQuota(quota: Quota, before: Usage, after: Usage): void {
  checkQuota(quota, before, { keys: after.keys - before.keys, bytes: after.bytes - before.bytes });
}
