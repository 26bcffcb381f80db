// How a statement is written once and compiled per dialect: named parameters, a Kysely that only
// compiles, and the binding of named arguments to a compiled statement's positions.
import {
  type Compilable,
  DummyDriver,
  Kysely,
  type Kysely as KyselyType,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  SqliteAdapter,
  SqliteIntrospector,
  SqliteQueryCompiler,
  sql,
} from 'kysely';
import type { Dialect } from './dialect.js';
import type { Database } from './schema.js';

/** A named parameter: Kysely places it as `?` (SQLite) or `$n` (PostgreSQL); `bind` fills it by name. */
class Named {
  constructor(readonly name: string) {}
}

// Typed `never`: a placeholder stands for a value of any column's type, and `never` fits every one.
export const param = (name: string) => sql<never>`${new Named(name)}`;

/** One statement compiled for one dialect: its SQL and the names of its positional parameters, in order. */
export interface CompiledStatement {
  name: string;
  sql: string;
  params: string[];
}

/**
 * A Kysely that only compiles (no connection): the dialect's own query compiler decides the
 * placeholders and quoting. On PostgreSQL every table is schema-qualified, so no statement
 * depends on a session's search_path (which a transaction pooler cannot carry).
 */
export function queryBuilder(dialect: Dialect, schema?: string): KyselyType<Database> {
  const db = new Kysely<Database>({
    dialect:
      dialect === 'sqlite'
        ? {
            createAdapter: () => new SqliteAdapter(),
            createDriver: () => new DummyDriver(),
            createIntrospector: (k) => new SqliteIntrospector(k),
            createQueryCompiler: () => new SqliteQueryCompiler(),
          }
        : {
            createAdapter: () => new PostgresAdapter(),
            createDriver: () => new DummyDriver(),
            createIntrospector: (k) => new PostgresIntrospector(k),
            createQueryCompiler: () => new PostgresQueryCompiler(),
          },
  });
  return schema ? db.withSchema(schema) : db;
}

export function compileStatement(name: string, query: Compilable): CompiledStatement {
  const compiled = query.compile();
  const params = compiled.parameters.map((p, i) => {
    if (!(p instanceof Named)) throw new Error(`statement ${name}: parameter ${i + 1} is a literal, not a named parameter`);
    return p.name;
  });
  return { name, sql: compiled.sql, params };
}

/** The positional values for a compiled statement, from named arguments. A missing name is a bug, so it throws. */
export function bind(statement: CompiledStatement, args: Record<string, unknown>): unknown[] {
  return statement.params.map((name) => {
    const value = args[name];
    if (value === undefined) throw new Error(`statement ${statement.name}: no value for parameter ${name}`);
    return value;
  });
}

/**
 * One statement per shape, each under its shape's name. `shapes` lists every shape (a test counts
 * them), so each name of type N is there.
 */
export function compileShapes<S, N extends string>(
  shapes: readonly S[],
  name: (shape: S) => N,
  statement: (shape: S) => Compilable,
): Record<N, CompiledStatement> {
  return Object.fromEntries(shapes.map((s) => [name(s), compileStatement(name(s), statement(s))])) as Record<N, CompiledStatement>;
}

/** Compiles every statement of a group for one dialect. */
export function compileAll<T extends Record<string, Compilable>>(group: T): { [K in keyof T]: CompiledStatement } {
  return Object.fromEntries(Object.entries(group).map(([name, query]) => [name, compileStatement(name, query)])) as {
    [K in keyof T]: CompiledStatement;
  };
}
