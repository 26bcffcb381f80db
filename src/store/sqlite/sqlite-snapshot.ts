import BetterSqlite3 from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { prefixUpperBound } from '../../values/keys.js';
import { type CompiledStatement, bind } from '../statements.js';
import type { Entry, EntrySnapshot } from '../store.js';
import { toEntry } from '../entry-row.js';

/** A private temp directory (0700) for an import's staging file. */
export function privateTempDir(purpose: string): { dir: string; file: string; remove: () => void } {
  const dir = mkdtempSync(join(tmpdir(), `kvb-${purpose}-`));
  return { dir, file: join(dir, `${purpose}.db`), remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/**
 * How long an export may hold its SQLite snapshot. A reader holding a WAL snapshot keeps the
 * checkpoint from going past it, so the WAL grows with every write made meanwhile; past this an
 * export is cut off (its end line is never sent, so no import accepts the truncated file).
 */
export const SNAPSHOT_MAX_MS = 30 * 60 * 1000;

type Row = [Buffer, string, Buffer, number | null, number, number];

/**
 * An export's snapshot on SQLite: a read-only connection of its own on the database file, inside
 * one read transaction (a WAL snapshot), read at the client's pace while the server keeps writing
 * on its connection. (A connection runs nothing else while an iterator is open, hence one per
 * export.) Batches write their bucket's final revision in their own transaction, so the revision
 * read first and the entries read after agree. An in-memory database has no file to open again:
 * its rows are read at once on the server's connection (a development setting).
 */
export async function openSqliteSnapshot(
  source: { path: string } | { memory: BetterSqlite3.Database },
  statements: { bucketRevision: CompiledStatement; snapshotEntries: CompiledStatement; snapshotEntriesUpper: CompiledStatement },
  bucket: string,
  prefix: string,
  now: number,
): Promise<EntrySnapshot | undefined> {
  const connection =
    'path' in source ? new BetterSqlite3(source.path, { readonly: true, fileMustExist: true, timeout: 5000 }) : source.memory;
  const own = 'path' in source;
  const end = () => {
    if (own && connection.open) connection.close();
  };
  try {
    // Deferred: the snapshot is taken by the first read below and held until the connection closes.
    if (own) connection.exec('begin');
    const bucketRow = connection.prepare(statements.bucketRevision.sql).get(bind(statements.bucketRevision, { bucket })) as
      | { revision: number }
      | undefined;
    if (bucketRow === undefined) {
      end();
      return undefined;
    }
    const prefixBytes = Buffer.from(prefix);
    const upper = prefix ? prefixUpperBound(prefixBytes) : undefined;
    const statement = upper ? statements.snapshotEntriesUpper : statements.snapshotEntries;
    const query = connection.prepare(statement.sql).raw(true);
    const args = bind(statement, { bucket, prefix: prefixBytes, now, upper });
    const rows = own ? (query.iterate(args) as IterableIterator<Row>) : (query.all(args) as Row[])[Symbol.iterator]();
    const opened = Date.now();
    let closed = false;
    const close = () => {
      if (closed) return;
      closed = true;
      rows.return?.();
      end();
    };
    return {
      revision: Number(bucketRow.revision),
      async read(max: number): Promise<Array<{ key: string; entry: Entry }>> {
        if (!closed && Date.now() - opened > SNAPSHOT_MAX_MS) {
          close();
          throw new Error(`the export held its snapshot for more than ${SNAPSHOT_MAX_MS / 60_000} minutes and was cut off`);
        }
        const out: Array<{ key: string; entry: Entry }> = [];
        while (!closed && out.length < max) {
          const next = rows.next();
          if (next.done) break;
          const [key, type, value, expires_at, revision, create_revision] = next.value;
          out.push({ key: key.toString('utf8'), entry: toEntry({ type, value, expires_at, revision, create_revision }) });
        }
        return out;
      },
      async close(): Promise<void> {
        close();
      },
    };
  } catch (err) {
    end();
    throw err;
  }
}
