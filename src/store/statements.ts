// The SQL statements both dialects share (each written once, compiled per dialect), and SQLite's
// few of its own; PostgreSQL's own are in postgres/postgres-statements.ts.
import { type Compilable, type Kysely as KyselyType, type SelectExpression, sql } from 'kysely';
import { BUCKET_FIELDS, type BucketColumn } from './bucket-columns.js';
import type { Dialect } from './dialect.js';
import { compileShapes, param } from './statement-compiler.js';
import { usageRecount } from './kvb-migrations.js';
import {
  CHANGE_INSERT_COLUMNS,
  CHANGE_ROW_PARAMS,
  type Database,
  ENTRY_INSERT_COLUMNS,
  replaceChangeOnConflict,
  replaceEntryOnConflict,
} from './schema.js';
import type { ListColumns } from './store.js';

// Dialect lives in dialect.ts (kvb-migrations.ts needs it, and this module needs kvb-migrations.ts).
export type { Dialect };
// The compiling of statements has its own module; its names are imported from here as from there.
export {
  type CompiledStatement,
  bind,
  compileAll,
  compileShapes,
  compileStatement,
  param,
  queryBuilder,
} from './statement-compiler.js';

/** The columns a key read returns. */
const ENTRY_COLUMNS = ['type', 'value', 'expires_at', 'revision', 'create_revision'] as const;

/**
 * One key's row from named parameters: what a set writes (SQLite's `putEntry`). A key it creates
 * is created at the write's revision; one it replaces keeps its create revision while live at `now`.
 */
const ENTRY_ROW = {
  bucket_id: param('bucket'),
  key: param('key'),
  type: param('type'),
  value: param('value'),
  expires_at: param('expiresAt'),
  revision: param('revision'),
  create_revision: param('revision'),
} satisfies Record<(typeof ENTRY_INSERT_COLUMNS)[number], unknown>;

/** The shape of one listing statement (each shape is compiled once). */
export interface ListShape {
  reverse: boolean;
  columns: ListColumns;
  /** A `prefix` upper bound is given. */
  upper: boolean;
  /**
   * The lower bound is exclusive: it is a cursor position (`after`, ascending). A listing has ONE
   * lower and ONE upper bound (see list-bounds.ts), so a page after a cursor is a seek to it.
   */
  after: boolean;
}

const COLUMNS_LETTER = { keys: 'k', meta: 'm', values: 'v' } as const satisfies Record<ListColumns, string>;

/** A listing statement's name: every shape's, so a misspelt one does not compile. */
export type ListShapeName = `list_${'asc' | 'desc'}_${(typeof COLUMNS_LETTER)[ListColumns]}${'' | '_u'}${'' | '_a'}`;

export const listShapeName = (s: ListShape): ListShapeName =>
  `list_${s.reverse ? 'desc' : 'asc'}_${COLUMNS_LETTER[s.columns]}${s.upper ? '_u' : ''}${s.after ? '_a' : ''}`;

const LIST_COLUMNS: ListColumns[] = ['keys', 'meta', 'values'];

/** Every listing shape, so both stores can compile them all up front. */
export const LIST_SHAPES: ListShape[] = [false, true].flatMap((reverse) =>
  LIST_COLUMNS.flatMap((columns) => [false, true].flatMap((upper) => [false, true].map((after) => ({ reverse, columns, upper, after })))),
);

/** The bytes a stored key counts toward its bucket's usage: key and value (the same on both backends). */
export const ENTRY_SIZE = sql<number>`length(key) + length(value)`;

export function listStatement(db: KyselyType<Database>, s: ListShape): Compilable {
  let query = db
    .selectFrom('entries')
    .select(
      (eb): Array<SelectExpression<Database, 'entries'>> =>
        s.columns === 'values'
          ? ['key', ...ENTRY_COLUMNS]
          : s.columns === 'meta'
            ? // length() of a BLOB (SQLite) or bytea (PostgreSQL) counts bytes; the value itself is never read out.
              ['key', 'type', eb.fn<number>('length', ['value']).as('size'), 'expires_at', 'revision']
            : ['key'],
    )
    .where('bucket_id', '=', param('bucket'))
    .where('key', s.after ? '>' : '>=', param('lower'))
    .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', param('now'))]));
  if (s.upper) query = query.where('key', '<', param('upper'));
  return query
    .orderBy('key', s.reverse ? 'desc' : 'asc')
    .limit(param('limit'))
    .offset(param('offset'));
}

/**
 * The statements both backends run, each written once. Parameters are named; `bind` orders them
 * for the dialect. The bucket revision bump (`bumpBucket`) is every write's first statement: it
 * numbers the write and, on PostgreSQL, its row lock orders the bucket's writers.
 */
export function sharedStatements(db: KyselyType<Database>) {
  return {
    /** Each policy column from the BucketRecord field of its name, then when. */
    createBucket: db.insertInto('buckets').values({
      ...(Object.fromEntries(BUCKET_FIELDS.map(({ column, field }) => [column, param(field)])) as Record<
        BucketColumn,
        ReturnType<typeof param>
      >),
      created_at: param('createdAt'),
    }),
    getBucket: db.selectFrom('buckets').selectAll().where('id', '=', param('id')),
    bucketRevision: db.selectFrom('buckets').select('revision').where('id', '=', param('bucket')),
    bumpBucket: db
      .updateTable('buckets')
      .set({ revision: sql`revision + 1` })
      .where('id', '=', param('bucket'))
      // Usage as of the row lock: what a quota is checked against.
      .returning(['revision', 'usage_keys', 'usage_bytes']),
    /** Per-bucket quotas: what one stored key costs (key and value bytes); no row when absent. */
    entrySize: db
      .selectFrom('entries')
      .select(ENTRY_SIZE.as('size'))
      .where('bucket_id', '=', param('bucket'))
      .where('key', '=', param('key')),
    addUsage: db
      .updateTable('buckets')
      .set({ usage_keys: sql`usage_keys + ${param('keys')}`, usage_bytes: sql`usage_bytes + ${param('bytes')}` })
      .where('id', '=', param('bucket')),
    bucketUsage: db.selectFrom('buckets').select(['usage_keys', 'usage_bytes']).where('id', '=', param('bucket')),
    /** After an import (millions of keys in one statement): counted again, exactly. */
    recountUsage: db.updateTable('buckets').set(usageRecount).where('id', '=', param('bucket')),
    /** SQLite: a batch's final revision of a bucket; both: a restored bucket's revision. */
    setRevision: db
      .updateTable('buckets')
      .set({ revision: param('revision') })
      .where('id', '=', param('bucket')),
    deleteBucket: db.deleteFrom('buckets').where('id', '=', param('bucket')),
    deleteBucketEntries: db.deleteFrom('entries').where('bucket_id', '=', param('bucket')),
    getEntry: db.selectFrom('entries').select(ENTRY_COLUMNS).where('bucket_id', '=', param('bucket')).where('key', '=', param('key')),
    putEntry: db
      .insertInto('entries')
      .values(ENTRY_ROW)
      .onConflict(replaceEntryOnConflict(param('now'))),
    removeEntry: db.deleteFrom('entries').where('bucket_id', '=', param('bucket')).where('key', '=', param('key')).returning(ENTRY_COLUMNS),
    expiredEntries: db.selectFrom('entries').select(['bucket_id', 'key']).where('expires_at', '<=', param('now')).limit(param('batch')),
    countEntries: db.selectFrom('entries').select((eb) => eb.fn.countAll().as('n')),
    countBuckets: db.selectFrom('buckets').select((eb) => eb.fn.countAll().as('n')),
    /** The watch feed: one bucket's changes after a revision and up to another, in order (a range seek on the primary key). */
    changesAfter: db
      .selectFrom('changes')
      .select(CHANGE_COLUMNS)
      .where('bucket_id', '=', param('bucket'))
      .where('revision', '>', param('after'))
      .where('revision', '<=', param('upTo'))
      .orderBy('revision')
      .orderBy('key')
      .limit(param('limit')),
    changesAt: db
      .selectFrom('changes')
      .select(CHANGE_COLUMNS)
      .where('bucket_id', '=', param('bucket'))
      .where('revision', '=', param('revision'))
      .orderBy('key'),
    changesFloor: db.selectFrom('buckets').select(['changes_floor', 'watch_floor', 'revision']).where('id', '=', param('bucket')),
    /** An import's revision: watchers behind it are reset (its keys are history, not feed events). */
    raiseWatchFloor: db
      .updateTable('buckets')
      .set({ watch_floor: param('revision') })
      .where('id', '=', param('bucket'))
      .where('watch_floor', '<', param('revision')),
    /**
     * Per bucket, the newest change older than the retention and above the floor (the floor rises
     * to it). Rows at or below the floor stay as history's base, so only rows committed since the
     * last pass (`since`) are looked at.
     */
    prunable: db
      .selectFrom('changes as c')
      .innerJoin('buckets as b', 'b.id', 'c.bucket_id')
      .select(['c.bucket_id', (eb) => eb.fn.max('c.revision').as('revision')])
      .where('c.committed_at', '<', param('before'))
      .where('c.committed_at', '>=', param('since'))
      .whereRef('c.revision', '>', 'b.changes_floor')
      .groupBy('c.bucket_id')
      .limit(param('batch')),
    raiseFloor: db
      .updateTable('buckets')
      .set({ changes_floor: param('revision') })
      .where('id', '=', param('bucket'))
      .where('changes_floor', '<', param('revision')),
    pruneChanges: db.deleteFrom('changes').where('bucket_id', '=', param('bucket')).where('revision', '<=', param('revision')),
    deleteBucketChanges: db.deleteFrom('changes').where('bucket_id', '=', param('bucket')),
  };
}

/**
 * Export, import, dump and check, written once for both dialects. `staged` is the import's
 * staging table (SQLite: a table in an attached private database; PostgreSQL: a temporary
 * table of the import's own transaction); it has the columns key, type, value, expires_at and
 * revision (and create_revision, null when the dump had none). Casts in the select list give PostgreSQL the parameters' types; SQLite accepts them.
 */
export function portabilityStatements(db: KyselyType<Database>, staged: string) {
  const snapshot = (upper: boolean) => {
    const query = db
      .selectFrom('entries')
      .select(['key', ...ENTRY_COLUMNS])
      .where('bucket_id', '=', param('bucket'))
      .where('key', '>=', param('prefix'))
      .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', param('now'))]));
    return (upper ? query.where('key', '<', param('upper')) : query).orderBy('key');
  };
  const clear = (upper: boolean) => {
    const query = db.deleteFrom('entries').where('bucket_id', '=', param('bucket')).where('key', '>=', param('prefix'));
    return upper ? query.where('key', '<', param('upper')) : query;
  };
  /**
   * Every staged row into the bucket; `keep`: with its staged revision and create revision (a
   * restore), else with `revision` (one import, one revision).
   */
  const copy = (keep: boolean) =>
    db
      .insertInto('entries')
      .columns(ENTRY_INSERT_COLUMNS)
      .expression(
        db
          .selectFrom(sql.table(staged).as('s'))
          .select([
            sql`cast(${param('bucket')} as text)`.as('bucket_id'),
            sql.ref('s.key').as('key'),
            sql.ref('s.type').as('type'),
            sql.ref('s.value').as('value'),
            sql.ref('s.expires_at').as('expires_at'),
            (keep ? sql.ref('s.revision') : sql`cast(${param('revision')} as bigint)`).as('revision'),
            (keep
              ? sql`coalesce(${sql.ref('s.create_revision')}, ${sql.ref('s.revision')})`
              : sql`cast(${param('revision')} as bigint)`
            ).as('create_revision'),
          ])
          // SQLite needs a WHERE before an upsert's ON CONFLICT in INSERT … SELECT (else it parses a join's ON).
          .where(sql<boolean>`true`),
      )
      // An import is a write: a key live before it keeps its create revision; a restore's rows carry theirs.
      .onConflict(replaceEntryOnConflict(keep ? undefined : param('now')));
  return {
    snapshotEntries: snapshot(false),
    snapshotEntriesUpper: snapshot(true),
    clearRange: clear(false),
    clearRangeUpper: clear(true),
    copyStaged: copy(false),
    copyStagedKeepRevisions: copy(true),
    listBuckets: db.selectFrom('buckets').selectAll().where('id', '>', param('after')).orderBy('id').limit(param('limit')),
    orphanEntries: db
      .selectFrom('entries')
      .select((eb) => eb.fn.countAll().as('n'))
      .where(({ not, exists, selectFrom }) =>
        not(exists(selectFrom('buckets').select('id').whereRef('buckets.id', '=', 'entries.bucket_id'))),
      ),
  };
}

const CHANGE_COLUMNS = ['revision', 'key', 'kind', 'type', 'value', 'expires_at'] as const;

/** The fields of one change-log row, in the order a multi-row insert (`logChangeRows`) binds them. */
export const CHANGE_ROW_FIELDS = CHANGE_INSERT_COLUMNS.map((column) => CHANGE_ROW_PARAMS[column]);

/** How many rows SQLite's multi-row statements take at once: a batch's rows go in the fewest statements of these sizes. */
export const MULTI_ROW_CHUNKS = [64, 16, 4, 1] as const;

/** The columns of an insert into `revision_ops`, in the order its multi-row insert binds them. */
const OPERATION_INSERT_COLUMNS = ['bucket_id', 'revision', 'operation', 'committed_at'] as const;

/**
 * SQLite's multi-row statements, by family: each row's fields in the order the writer binds them
 * positionally (parameters `r0_<field>`, `r1_<field>`, …, row by row).
 */
export const MULTI_ROW_FIELDS = {
  logChanges: CHANGE_ROW_FIELDS,
  putEntries: ENTRY_INSERT_COLUMNS,
  logOperations: OPERATION_INSERT_COLUMNS,
} as const;

export type MultiRowFamily = keyof typeof MULTI_ROW_FIELDS;
export type MultiRowName = `${MultiRowFamily}${(typeof MULTI_ROW_CHUNKS)[number]}`;

/** `rows` rows of named parameters for `columns` (the row's fields named `fields`). */
function rowParams<C extends string>(columns: readonly C[], fields: readonly string[], rows: number) {
  return Array.from(
    { length: rows },
    (_, i) => Object.fromEntries(columns.map((column, j) => [column, param(`r${i}_${fields[j]}`)])) as Record<C, ReturnType<typeof param>>,
  );
}

/**
 * SQLite only: `rows` change-log rows in one insert. A later change of the same key at the same
 * revision replaces the earlier one, within the statement too (SQLite applies the rows one by
 * one): the final state of a transaction's key counts.
 */
export function logChangeRows(db: KyselyType<Database>, rows: number) {
  return db
    .insertInto('changes')
    .values(rowParams(CHANGE_INSERT_COLUMNS, CHANGE_ROW_FIELDS, rows))
    .onConflict(replaceChangeOnConflict);
}

/**
 * SQLite only: a batch's statements of many rows each: its change-log rows, its keys' final rows
 * (`putEntries`: each row as the write rules left it, its create revision included) and what made
 * its revisions (`logOperations`).
 */
export function sqliteStatements(db: KyselyType<Database>) {
  const statements = {} as Record<MultiRowName, Compilable>;
  for (const n of MULTI_ROW_CHUNKS) {
    statements[`logChanges${n}`] = logChangeRows(db, n);
    statements[`putEntries${n}`] = db
      .insertInto('entries')
      .values(rowParams(ENTRY_INSERT_COLUMNS, ENTRY_INSERT_COLUMNS, n))
      .onConflict(replaceEntryOnConflict());
    statements[`logOperations${n}`] = db
      .insertInto('revision_ops')
      .values(rowParams(OPERATION_INSERT_COLUMNS, OPERATION_INSERT_COLUMNS, n))
      .onConflict((oc) =>
        oc
          .columns(['bucket_id', 'revision'])
          .doUpdateSet((eb) => ({ operation: eb.ref('excluded.operation'), committed_at: eb.ref('excluded.committed_at') })),
      );
  }
  return statements;
}

/** Every listing statement, compiled for one store. */
export const compileListShapes = (db: KyselyType<Database>) => compileShapes(LIST_SHAPES, listShapeName, (s) => listStatement(db, s));
