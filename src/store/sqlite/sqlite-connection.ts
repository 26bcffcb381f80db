import type BetterSqlite3 from 'better-sqlite3';
import { type EntryRow, toEntry, toMeta } from '../entry-row.js';
import { compileHistory } from '../history-statements.js';
import { listBounds } from '../list-bounds.js';
import {
  MULTI_ROW_CHUNKS,
  MULTI_ROW_FIELDS,
  type MultiRowFamily,
  bind,
  compileAll,
  compileListShapes,
  listShapeName,
  portabilityStatements,
  queryBuilder,
  sharedStatements,
  sqliteStatements,
} from '../statements.js';
import type { ListQuery, ListedEntry } from '../store.js';

/** The name an import's staging database is attached under while it is applied (one at a time). */
export const IMPORT_ALIAS = 'kvb_import';

type Args = Record<string, unknown>;

/** Every statement a SQLite connection runs, compiled once, under names the type checker knows. */
function compileSqliteStatements() {
  const builder = queryBuilder('sqlite');
  return {
    ...compileAll(sharedStatements(builder)),
    ...compileAll(sqliteStatements(builder)),
    ...compileAll(portabilityStatements(builder, `${IMPORT_ALIAS}.staged`)),
    ...compileHistory(builder, `${IMPORT_ALIAS}.staged`),
    ...compileListShapes(builder),
  };
}

/** A SQLite statement's name: a misspelt one does not compile. */
export type SqliteStatementName = keyof ReturnType<typeof compileSqliteStatements>;

/**
 * One better-sqlite3 connection with kvb's statements (statements.ts), compiled once and run as
 * cached prepared statements. The request thread reads through one, the writer thread writes
 * through another; both list and read rows the same way.
 */
export class SqliteConnection {
  readonly sql = compileSqliteStatements();
  private readonly prepared = new Map<SqliteStatementName, BetterSqlite3.Statement>();

  constructor(readonly raw: BetterSqlite3.Database) {
    // The writer binds multi-row statements positionally, row by row in MULTI_ROW_FIELDS order.
    for (const [family, fields] of Object.entries(MULTI_ROW_FIELDS) as Array<[MultiRowFamily, readonly string[]]>) {
      for (const n of MULTI_ROW_CHUNKS) {
        const expected = Array.from({ length: n }, (_, i) => fields.map((f) => `r${i}_${f}`)).flat();
        if (this.sql[`${family}${n}`].params.join() !== expected.join()) throw new Error(`${family}${n}: parameters out of order`);
      }
    }
  }

  /** A compiled statement by name, prepared on first use. */
  statement(name: SqliteStatementName): BetterSqlite3.Statement {
    let statement = this.prepared.get(name);
    if (!statement) {
      statement = this.raw.prepare(this.sql[name].sql);
      this.prepared.set(name, statement);
    }
    return statement;
  }

  args(name: SqliteStatementName, args: Args): unknown[] {
    return bind(this.sql[name], args);
  }

  run(name: SqliteStatementName, args: Args = {}): BetterSqlite3.RunResult {
    return this.statement(name).run(this.args(name, args));
  }

  get<T>(name: SqliteStatementName, args: Args = {}): T | undefined {
    return this.statement(name).get(this.args(name, args)) as T | undefined;
  }

  all<T>(name: SqliteStatementName, args: Args = {}): T[] {
    return this.statement(name).all(this.args(name, args)) as T[];
  }

  /** Runs a statement that names the attached import database: prepared afresh, as it is detached right after. */
  runOnce(name: SqliteStatementName, args: Args): void {
    this.raw.prepare(this.sql[name].sql).run(this.args(name, args));
  }

  /**
   * Writes `rows` (each its fields in MULTI_ROW_FIELDS[family] order) in as few statements of the
   * family as MULTI_ROW_CHUNKS allow: one statement's overhead for up to 64 rows.
   */
  insertRows(family: MultiRowFamily, rows: readonly unknown[][]): void {
    let at = 0;
    for (const n of MULTI_ROW_CHUNKS) {
      for (; rows.length - at >= n; at += n) {
        const args: unknown[] = [];
        for (let i = at; i < at + n; i++) for (const field of rows[i]!) args.push(field);
        this.statement(`${family}${n}`).run(args);
      }
    }
  }

  readEntry(bucket: string, key: Buffer): EntryRow | undefined {
    return this.get<EntryRow>('getEntry', { bucket, key });
  }

  list(bucket: string, q: ListQuery, now: number): ListedEntry[] {
    const { lower, lowerOp, upper } = listBounds(q);
    const name = listShapeName({ reverse: q.reverse, columns: q.columns, upper: upper !== undefined, after: lowerOp === '>' });
    // Rows as arrays: building an object per row was a visible share of a listing's cost.
    const rows = this.statement(name)
      .raw(true)
      .all(this.args(name, { bucket, lower, now, limit: q.limit, offset: q.offset, upper })) as Array<
      // The third column is the value (columns 'values') or its byte length (columns 'meta'); the sixth, the create revision, comes with values only.
      [Buffer, string, Buffer | number, number | null, number, number?]
    >;
    return rows.map(([key, type, third, expires_at, revision, create_revision]) => ({
      key: key.toString('utf8'),
      ...(q.columns === 'values' && {
        entry: toEntry({ type, value: third as Buffer, expires_at, revision, create_revision: create_revision! }),
      }),
      ...(q.columns === 'meta' && { meta: toMeta({ type, size: third as number, expires_at, revision }) }),
    }));
  }
}
