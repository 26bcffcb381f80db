import BetterSqlite3 from 'better-sqlite3';
import type { Actor } from '../history-types.js';
import type { ImportStaging, KeyedEntry, Written } from '../store.js';
import { privateTempDir } from './sqlite-snapshot.js';
import type { WriteRequest } from './sqlite-write-protocol.js';

/**
 * An import on SQLite: staged into a private temp database (no journal, no fsync: it is thrown
 * away on failure), then applied by the writer with one statement inside one write batch (its
 * staging file attached to the writer's connection just for that; sqlite-write-requests.ts).
 * `apply` hands the writer the request and waits for its answer; imports apply one at a time.
 */
export function stageSqliteImport(
  bucket: string,
  write: (request: WriteRequest) => Promise<Written | { refused: 'no_bucket' }>,
  serialise: <T>(run: () => Promise<T>) => Promise<T>,
): ImportStaging {
  const temp = privateTempDir('import');
  const staging = new BetterSqlite3(temp.file);
  let finished = false;
  try {
    staging.pragma('journal_mode = OFF');
    staging.pragma('synchronous = OFF');
    // A private file of this import's own: not kvb's schema, so not in statements.ts.
    staging.exec(
      'create table staged (key blob primary key, type text not null, value blob not null, expires_at integer, revision integer not null, create_revision integer) without rowid',
    );
  } catch (err) {
    staging.close();
    temp.remove();
    throw err;
  }
  const insert = staging.prepare(
    'insert or replace into staged (key, type, value, expires_at, revision, create_revision) values (?, ?, ?, ?, ?, ?)',
  );
  const addAll = staging.transaction((entries: KeyedEntry[]) => {
    for (const { key, entry } of entries)
      insert.run(Buffer.from(key), entry.type, entry.data, entry.expiresAt, entry.revision ?? 0, entry.createRevision ?? null);
  });
  const finish = () => {
    finished = true;
    if (staging.open) staging.close();
    temp.remove();
  };
  const apply = async (options: { replace: boolean; prefix: string; restoreRevision?: number; actor?: Actor }) => {
    if (finished) throw new Error('import already finished');
    // Closed before the writer attaches it: every staged row is in the file.
    staging.close();
    try {
      return await write({ kind: 'import', bucket, file: temp.file, ...options });
    } finally {
      finish();
    }
  };
  return {
    add: async (entries) => {
      addAll(entries);
    },
    abort: async () => {
      if (!finished) finish();
    },
    apply: (options) => serialise(() => apply(options)),
  };
}
