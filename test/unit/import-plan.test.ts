import { describe, expect, it } from 'vitest';
import { KvbError } from '../../src/errors.js';
import { type ImportPlan, type ImportRequest, checkImportQuota, planImport } from '../../src/store/core/import-plan.js';
import { compileHistory } from '../../src/store/history-statements.js';
import type { Actor } from '../../src/store/history-types.js';
import { compileAll, portabilityStatements, queryBuilder, sharedStatements } from '../../src/store/statements.js';

/** An import's rules (src/store/core/import-plan.ts) as plain data: no database. */
const NOW = 1_800_000_000_000;
const ACTOR: Actor = { kind: 'token', tokenId: 'tk1', address: '203.0.113.7' };
const WHO = { actorKind: 'token', actorToken: 'tk1', actorAddress: '203.0.113.7' };
const NOBODY = { actorKind: null, actorToken: null, actorAddress: null };

const request = (extra: Partial<ImportRequest> = {}): ImportRequest => ({ bucket: 'b', replace: false, prefix: '', now: NOW, ...extra });

function planned(extra: Partial<ImportRequest> = {}, current = 41): ImportPlan {
  const plan = planImport(request(extra), current);
  if ('refused' in plan) throw new Error('refused');
  return plan;
}

/** A plan's steps in order, one word each: what runs, not with what. */
const outline = (plan: ImportPlan) => plan.steps.map((s) => (s.step === 'statement' ? s.name : s.step));

/** The parameters a plan gives one statement. */
function argsOf(plan: ImportPlan, name: string): Record<string, unknown> {
  const step = plan.steps.find((s) => s.step === 'statement' && s.name === name);
  if (step?.step !== 'statement') throw new Error(`no ${name} in the plan`);
  return step.args;
}

describe('an import is planned from its options and the bucket revision', () => {
  it('a bucket that is gone is refused, and nothing is planned', () => {
    expect(planImport(request(), undefined)).toEqual({ refused: 'no_bucket' });
    expect(planImport(request({ replace: true, prefix: 'a/' }), undefined)).toEqual({ refused: 'no_bucket' });
    expect(planImport(request({ restoreRevision: 7 }), undefined)).toEqual({ refused: 'no_bucket' });
  });

  it('a merge without a prefix: one new revision, its keys logged then copied, usage recounted and checked, watchers reset', () => {
    const plan = planned();
    expect(plan.revision).toBe(42);
    expect(outline(plan)).toEqual(['bump', 'logStaged', 'copyStaged', 'recountUsage', 'checkQuota', 'raiseWatchFloor', 'logOperation']);
    expect(argsOf(plan, 'logStaged')).toEqual({ bucket: 'b', revision: 42, now: NOW, ...NOBODY });
    expect(argsOf(plan, 'copyStaged')).toEqual({ bucket: 'b', revision: 42, now: NOW });
    expect(argsOf(plan, 'recountUsage')).toEqual({ bucket: 'b' });
    expect(argsOf(plan, 'raiseWatchFloor')).toEqual({ bucket: 'b', revision: 42 });
    expect(argsOf(plan, 'logOperation')).toEqual({ bucket: 'b', revision: 42, operation: 'import', now: NOW });
  });

  it('a merge under a prefix removes nothing: the prefix only bounds a replace', () => {
    expect(outline(planned({ prefix: 'a/' }))).toEqual(outline(planned()));
  });

  it('a replace without a prefix logs every key it removes as deleted, then clears the whole bucket, before the copy', () => {
    const plan = planned({ replace: true });
    expect(outline(plan)).toEqual([
      'bump',
      'logStaged',
      'logCleared',
      'clearRange',
      'copyStaged',
      'recountUsage',
      'checkQuota',
      'raiseWatchFloor',
      'logOperation',
    ]);
    expect(argsOf(plan, 'logCleared')).toEqual({ bucket: 'b', revision: 42, now: NOW, prefix: Buffer.alloc(0), ...NOBODY });
    expect(argsOf(plan, 'clearRange')).toEqual({ bucket: 'b', prefix: Buffer.alloc(0) });
  });

  it('a replace under a prefix clears only that range: from the prefix up to its upper bound', () => {
    const plan = planned({ replace: true, prefix: 'a/' });
    expect(outline(plan)).toEqual([
      'bump',
      'logStaged',
      'logClearedUpper',
      'clearRangeUpper',
      'copyStaged',
      'recountUsage',
      'checkQuota',
      'raiseWatchFloor',
      'logOperation',
    ]);
    const range = { prefix: Buffer.from('a/'), upper: Buffer.from('a0') };
    expect(argsOf(plan, 'logClearedUpper')).toEqual({ bucket: 'b', revision: 42, now: NOW, ...range, ...NOBODY });
    expect(argsOf(plan, 'clearRangeUpper')).toEqual({ bucket: 'b', ...range });
  });

  it('a restore takes the restored revision: rows keep their own, history starts there, the watch floor is left to the compaction', () => {
    const plan = planned({ restoreRevision: 7 });
    expect(plan.revision).toBe(7);
    expect(outline(plan)).toEqual([
      'bump',
      'setRevision',
      'logStagedKeepRevisions',
      'copyStagedKeepRevisions',
      'recountUsage',
      'checkQuota',
      'compact',
      'logOperation',
    ]);
    expect(plan.steps[1]).toEqual({ step: 'setRevision', revision: 7 });
    expect(plan.steps[6]).toEqual({ step: 'compact', revision: 7, floor: -1 });
    expect(argsOf(plan, 'logStagedKeepRevisions')).toEqual({ bucket: 'b', now: NOW, ...NOBODY });
    expect(argsOf(plan, 'copyStagedKeepRevisions')).toEqual({ bucket: 'b' });
    expect(argsOf(plan, 'logOperation')).toEqual({ bucket: 'b', revision: 7, operation: 'import', now: NOW });
  });

  it('a replacing restore under a prefix logs its removals at the restored revision', () => {
    const plan = planned({ restoreRevision: 7, replace: true, prefix: 'a/' });
    expect(outline(plan)).toEqual([
      'bump',
      'setRevision',
      'logStagedKeepRevisions',
      'logClearedUpper',
      'clearRangeUpper',
      'copyStagedKeepRevisions',
      'recountUsage',
      'checkQuota',
      'compact',
      'logOperation',
    ]);
    expect(argsOf(plan, 'logClearedUpper')).toMatchObject({ revision: 7 });
  });

  it('every history row of the import names its actor', () => {
    const plan = planned({ replace: true, actor: ACTOR });
    expect(argsOf(plan, 'logStaged')).toMatchObject(WHO);
    expect(argsOf(plan, 'logCleared')).toMatchObject(WHO);
    expect(argsOf(planned({ restoreRevision: 7, actor: ACTOR }), 'logStagedKeepRevisions')).toMatchObject(WHO);
  });

  it('the statements that read the staging table say so; the others do not', () => {
    const staged = (plan: ImportPlan) => plan.steps.flatMap((s) => (s.step === 'statement' && s.staged ? [s.name] : []));
    expect(staged(planned({ replace: true, prefix: 'a/' }))).toEqual(['logStaged', 'logClearedUpper', 'copyStaged']);
    expect(staged(planned({ restoreRevision: 7, replace: true }))).toEqual([
      'logStagedKeepRevisions',
      'logCleared',
      'copyStagedKeepRevisions',
    ]);
  });

  it('each statement is given exactly the parameters it takes, on both dialects', () => {
    const compiled = (dialect: 'sqlite' | 'postgres') => {
      const db = dialect === 'sqlite' ? queryBuilder('sqlite') : queryBuilder('postgres', 'kvb');
      return {
        ...compileAll(sharedStatements(db)),
        ...compileAll(portabilityStatements(db, 'staged')),
        ...compileHistory(db, 'staged'),
      } as Record<string, { params: string[] }>;
    };
    const plans = [
      planned(),
      planned({ replace: true }),
      planned({ replace: true, prefix: 'a/' }),
      planned({ restoreRevision: 7, replace: true }),
      planned({ restoreRevision: 7, replace: true, prefix: 'a/' }),
    ];
    for (const dialect of ['sqlite', 'postgres'] as const) {
      const statements = compiled(dialect);
      for (const plan of plans) {
        for (const step of plan.steps) {
          if (step.step !== 'statement') continue;
          expect([dialect, step.name, Object.keys(step.args).sort()]).toEqual([
            dialect,
            step.name,
            [...new Set(statements[step.name]!.params)].sort(),
          ]);
        }
      }
    }
  });
});

describe("an import is held to its bucket's quota as a whole", () => {
  const quota = { maxKeys: 10, maxBytes: 1000 };
  const refusal = (run: () => void) => {
    try {
      run();
    } catch (error) {
      return error instanceof KvbError ? [error.kind, error.status] : error;
    }
    return 'passed';
  };

  it('an import that takes the bucket over its key quota is refused (507)', () => {
    expect(refusal(() => checkImportQuota(quota, { keys: 5, bytes: 100 }, { keys: 11, bytes: 200 }))).toEqual([
      'insufficient_storage',
      507,
    ]);
  });

  it('an import that takes the bucket over its byte quota is refused (507)', () => {
    expect(refusal(() => checkImportQuota(quota, { keys: 5, bytes: 100 }, { keys: 6, bytes: 1001 }))).toEqual([
      'insufficient_storage',
      507,
    ]);
  });

  it('an import up to the quota passes', () => {
    expect(refusal(() => checkImportQuota(quota, { keys: 5, bytes: 100 }, { keys: 10, bytes: 1000 }))).toBe('passed');
  });

  it('an import that shrinks the bucket passes even over a lowered quota', () => {
    expect(refusal(() => checkImportQuota(quota, { keys: 50, bytes: 5000 }, { keys: 20, bytes: 2000 }))).toBe('passed');
  });

  it('without a quota every import passes', () => {
    expect(refusal(() => checkImportQuota({ maxKeys: 0, maxBytes: 0 }, { keys: 0, bytes: 0 }, { keys: 1e9, bytes: 1e12 }))).toBe('passed');
  });
});
