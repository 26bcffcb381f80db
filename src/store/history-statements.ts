import { type Compilable, type Kysely, sql } from 'kysely';
import { compileAll, compileShapes, param } from './statements.js';
import { CHANGE_INSERT_COLUMNS, type Database, replaceChangeOnConflict } from './schema.js';

/**
 * History: reads of a bucket as of a past revision, a key's changes, and the
 * compaction that keeps the state at the floor rebuildable. Every statement is written once for
 * both dialects, like statements.ts; the change log's meaning is unchanged (one row per key per
 * revision, the key's state after it). A read at revision N takes, per key, the newest row at or
 * below N: etcd's MVCC read, on the log kvb already keeps for watchers.
 */

/** The shape of one listing-at-a-revision statement. */
export interface ListAtShape {
  reverse: boolean;
  upper: boolean;
  after: boolean;
}

/** A listing-at-a-revision statement's name: every shape's, so a misspelt one does not compile. */
export type ListAtShapeName = `list_at_${'asc' | 'desc'}${'' | '_u'}${'' | '_a'}`;

export const listAtShapeName = (s: ListAtShape): ListAtShapeName =>
  `list_at_${s.reverse ? 'desc' : 'asc'}${s.upper ? '_u' : ''}${s.after ? '_a' : ''}`;

export const LIST_AT_SHAPES: ListAtShape[] = [false, true].flatMap((reverse) =>
  [false, true].flatMap((upper) => [false, true].map((after) => ({ reverse, upper, after }))),
);

/**
 * One page of the keys live at `revision`: rows that are their key's newest at or below it, are
 * sets, and had not expired at `at` (the time of that revision). Each key's newest row is found
 * through the (bucket_id, key, revision) index.
 */
export function listAtStatement(db: Kysely<Database>, s: ListAtShape): Compilable {
  let query = db
    .selectFrom('changes as c')
    .select(['c.key', 'c.type', 'c.value', 'c.expires_at', 'c.revision'])
    .where('c.bucket_id', '=', param('bucket'))
    .where('c.key', s.after ? '>' : '>=', param('lower'))
    .where('c.revision', '<=', param('revision'))
    .where('c.kind', '=', sql.lit('set'))
    .where((eb) => eb.or([eb('c.expires_at', 'is', null), eb('c.expires_at', '>', param('at'))]))
    .where(({ eb, selectFrom }) =>
      eb(
        'c.revision',
        '=',
        selectFrom('changes as n')
          .select((n) => n.fn.max('n.revision').as('r'))
          .where('n.bucket_id', '=', param('bucket'))
          .whereRef('n.key', '=', 'c.key')
          .where('n.revision', '<=', param('revision')),
      ),
    );
  if (s.upper) query = query.where('c.key', '<', param('upper'));
  return query
    .orderBy('c.key', s.reverse ? 'desc' : 'asc')
    .limit(param('limit'))
    .offset(param('offset'));
}

const HISTORY_COLUMNS = [
  'c.revision',
  'c.kind',
  'c.type',
  'c.value',
  'c.expires_at',
  'c.committed_at',
  'c.actor_kind',
  'c.actor_token',
  'c.actor_address',
] as const;

/** How a key's history is narrowed: not at all, to one actor kind, or to one token's id. */
export type KeyHistoryFilter = 'all' | 'kind' | 'token';

export const keyHistoryName = (filter: KeyHistoryFilter) =>
  filter === 'all' ? 'keyHistory' : filter === 'kind' ? 'keyHistoryByKind' : 'keyHistoryByToken';

/** A key's changes, newest first, before a revision (the page's cursor), with what made each and who. */
export function keyHistoryStatement(db: Kysely<Database>, filter: KeyHistoryFilter): Compilable {
  let query = db
    .selectFrom('changes as c')
    .leftJoin('revision_ops as o', (join) => join.onRef('o.bucket_id', '=', 'c.bucket_id').onRef('o.revision', '=', 'c.revision'))
    .select([...HISTORY_COLUMNS, 'o.operation'])
    .where('c.bucket_id', '=', param('bucket'))
    .where('c.key', '=', param('key'))
    .where('c.revision', '<', param('before'));
  if (filter !== 'all') query = query.where('c.actor_kind', '=', param('actorKind'));
  if (filter === 'token') query = query.where('c.actor_token', '=', param('actorToken'));
  return query.orderBy('c.revision', 'desc').limit(param('limit'));
}

export const bucketLogName = (filter: KeyHistoryFilter) =>
  filter === 'all' ? 'bucketLog' : filter === 'kind' ? 'bucketLogByKind' : 'bucketLogByToken';

/**
 * A bucket's changes (or a key range's) in revision order, each revision's keys in byte order,
 * after the position (revision, key) of the previous page, within a revision range and a time
 * range: a walk of the primary key (bucket_id, revision, key).
 */
export function bucketLogStatement(db: Kysely<Database>, filter: KeyHistoryFilter): Compilable {
  let query = db
    .selectFrom('changes as c')
    .leftJoin('revision_ops as o', (join) => join.onRef('o.bucket_id', '=', 'c.bucket_id').onRef('o.revision', '=', 'c.revision'))
    .select(['c.key', ...HISTORY_COLUMNS, 'o.operation'])
    .where('c.bucket_id', '=', param('bucket'))
    .where(sql<boolean>`(${sql.ref('c.revision')}, ${sql.ref('c.key')}) > (${param('afterRevision')}, ${param('afterKey')})`)
    .where('c.revision', '<=', param('untilRevision'))
    .where('c.committed_at', '>=', param('sinceTime'))
    .where('c.committed_at', '<=', param('untilTime'))
    .where('c.key', '>=', param('lower'))
    .where('c.key', '<', param('upper'));
  if (filter !== 'all') query = query.where('c.actor_kind', '=', param('actorKind'));
  if (filter === 'token') query = query.where('c.actor_token', '=', param('actorToken'));
  return query.orderBy('c.revision', 'asc').orderBy('c.key', 'asc').limit(param('limit'));
}

export function historyStatements(db: Kysely<Database>) {
  return {
    /** A key's newest change at or below a revision (a read at that revision). */
    readAt: db
      .selectFrom('changes')
      .select(['kind', 'type', 'value', 'expires_at', 'revision'])
      .where('bucket_id', '=', param('bucket'))
      .where('key', '=', param('key'))
      .where('revision', '<=', param('revision'))
      .orderBy('revision', 'desc')
      .limit(sql.lit(1)),
    /**
     * When a revision committed: the newest change at or below it, or the newest timed operation
     * row at or below it (a revision without change rows has one), whichever is newer (the reader
     * takes the higher revision of the two rows). Expiry at that revision is judged by it.
     */
    timeAt: db
      .selectFrom('changes')
      .select(['revision', 'committed_at'])
      .where('bucket_id', '=', param('bucket'))
      .where('revision', '<=', param('revision'))
      .orderBy('revision', 'desc')
      .limit(sql.lit(1)),
    operationTimeAt: db
      .selectFrom('revision_ops')
      .select(['revision', 'committed_at'])
      .where('bucket_id', '=', param('bucket'))
      .where('revision', '<=', param('revision'))
      .where('committed_at', 'is not', null)
      .orderBy('revision', 'desc')
      .limit(sql.lit(1)),
    keyHistory: keyHistoryStatement(db, 'all'),
    keyHistoryByKind: keyHistoryStatement(db, 'kind'),
    keyHistoryByToken: keyHistoryStatement(db, 'token'),
    bucketLog: bucketLogStatement(db, 'all'),
    bucketLogByKind: bucketLogStatement(db, 'kind'),
    bucketLogByToken: bucketLogStatement(db, 'token'),
    /** What made a revision, when it is not a plain set, delete or expiry (counter, transaction, import, rollback). */
    logOperation: db
      .insertInto('revision_ops')
      .values({ bucket_id: param('bucket'), revision: param('revision'), operation: param('operation'), committed_at: param('now') })
      .onConflict((oc) =>
        oc
          .columns(['bucket_id', 'revision'])
          .doUpdateSet((eb) => ({ operation: eb.ref('excluded.operation'), committed_at: eb.ref('excluded.committed_at') })),
      ),
    /**
     * etcd-style compaction up to the floor `revision`: a row at or below it goes when a newer row
     * of its key at or below it exists, or when it is a delete or expiry (the key was absent
     * then). What remains at or below the floor is exactly the state at the floor. Only keys
     * changed since the previous floor (`floor`, exclusive) can have rows to drop.
     */
    compactChanges: db
      .deleteFrom('changes')
      .where('bucket_id', '=', param('bucket'))
      .where('revision', '<=', param('revision'))
      .where('key', 'in', (eb) =>
        eb
          .selectFrom('changes as k')
          .select('k.key')
          .where('k.bucket_id', '=', param('bucket'))
          .where('k.revision', '>', param('floor'))
          .where('k.revision', '<=', param('revision')),
      )
      .where((eb) =>
        eb.or([
          eb('kind', '<>', sql.lit('set')),
          eb.exists(
            eb
              .selectFrom('changes as n')
              .select(sql.lit(1).as('one'))
              .where('n.bucket_id', '=', param('bucket'))
              .where('n.key', '=', eb.ref('changes.key'))
              .where('n.revision', '>', eb.ref('changes.revision'))
              .where('n.revision', '<=', param('revision')),
          ),
        ]),
      ),
    /** Operation rows whose revision has no change row left. */
    pruneOperations: db
      .deleteFrom('revision_ops')
      .where('bucket_id', '=', param('bucket'))
      .where('revision', '<=', param('revision'))
      .where((eb) =>
        eb.not(
          eb.exists(
            eb
              .selectFrom('changes as c')
              .select(sql.lit(1).as('one'))
              .where('c.bucket_id', '=', param('bucket'))
              .where('c.revision', '=', eb.ref('revision_ops.revision')),
          ),
        ),
      ),
    deleteBucketOperations: db.deleteFrom('revision_ops').where('bucket_id', '=', param('bucket')),
    /** Buckets with changes committed since `since` (ms): the only ones whose history can have grown. */
    historyGrew: db
      .selectFrom('changes')
      .select('bucket_id')
      .where('committed_at', '>=', param('since'))
      .groupBy('bucket_id')
      .limit(param('batch')),
    /** The bytes (keys and values) of each revision's change rows above the floor, newest first: what --max-history-bytes-per-bucket bounds. */
    historyBytes: db
      .selectFrom('changes as c')
      .innerJoin('buckets as b', 'b.id', 'c.bucket_id')
      .select(['c.revision', sql<number>`sum(length(c.key) + coalesce(length(c.value), 0))`.as('bytes')])
      .where('c.bucket_id', '=', param('bucket'))
      .whereRef('c.revision', '>', 'b.changes_floor')
      .groupBy('c.revision')
      .orderBy('c.revision', 'desc'),
  };
}

/**
 * An import's history: each staged key's row at the import's revision (a restore: at its own),
 * and, for a replacing import, a delete row for each key of the range it removes. Run before the
 * import's copy and clear. `staged` as in portabilityStatements.
 */
export function historyImportStatements(db: Kysely<Database>, staged: string) {
  // Who imported: one actor for every row of the import's revision.
  const actorColumns = [
    sql`cast(${param('actorKind')} as text)`.as('actor_kind'),
    sql`cast(${param('actorToken')} as text)`.as('actor_token'),
    sql`cast(${param('actorAddress')} as text)`.as('actor_address'),
  ];
  const logStaged = (keep: boolean) =>
    db
      .insertInto('changes')
      .columns(CHANGE_INSERT_COLUMNS)
      .expression(
        db
          .selectFrom(sql.table(staged).as('s'))
          .select([
            sql`cast(${param('bucket')} as text)`.as('bucket_id'),
            (keep ? sql.ref('s.revision') : sql`cast(${param('revision')} as bigint)`).as('revision'),
            sql.ref('s.key').as('key'),
            sql`'set'`.as('kind'),
            sql.ref('s.type').as('type'),
            sql.ref('s.value').as('value'),
            sql.ref('s.expires_at').as('expires_at'),
            ...actorColumns,
            sql`cast(${param('now')} as bigint)`.as('committed_at'),
          ])
          .where(sql<boolean>`true`),
      )
      .onConflict(replaceChangeOnConflict);
  const logCleared = (upper: boolean) => {
    let select = db
      .selectFrom('entries as e')
      .select([
        sql`cast(${param('bucket')} as text)`.as('bucket_id'),
        sql`cast(${param('revision')} as bigint)`.as('revision'),
        'e.key',
        sql`'delete'`.as('kind'),
        sql`null`.as('type'),
        sql`null`.as('value'),
        sql`null`.as('expires_at'),
        ...actorColumns,
        sql`cast(${param('now')} as bigint)`.as('committed_at'),
      ])
      .where('e.bucket_id', '=', param('bucket'))
      .where('e.key', '>=', param('prefix'))
      .where(sql<boolean>`not exists (select 1 from ${sql.table(staged)} as s where s.key = e.key)`);
    if (upper) select = select.where('e.key', '<', param('upper'));
    return db
      .insertInto('changes')
      .columns(CHANGE_INSERT_COLUMNS)
      .expression(select)
      .onConflict((oc) => oc.doNothing());
  };
  return {
    logStaged: logStaged(false),
    logStagedKeepRevisions: logStaged(true),
    logCleared: logCleared(false),
    logClearedUpper: logCleared(true),
  };
}

/** Every history statement, compiled for one store. */
export function compileHistory(db: Kysely<Database>, staged: string) {
  return {
    ...compileAll(historyStatements(db)),
    ...compileAll(historyImportStatements(db, staged)),
    ...compileShapes(LIST_AT_SHAPES, listAtShapeName, (s) => listAtStatement(db, s)),
  };
}

/** The name of a history statement: what HistoryReader runs on either store. */
export type HistoryStatementName = keyof ReturnType<typeof compileHistory>;
