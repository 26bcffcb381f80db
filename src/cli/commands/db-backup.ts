import { EXIT_CODES } from '../../errors.js';
import { info, progress } from '../output.js';
import { DbError } from './db-error.js';

/**
 * `kvb db backup`'s copy of the SQLite file at `path` to a new 0600 file `out`, verified with
 * integrity_check; a copy that fails is removed. better-sqlite3 is loaded only when it runs.
 */
export async function backupSqliteFile(path: string, out: string): Promise<void> {
  const { closeSync, constants, existsSync, openSync, rmSync } = await import('node:fs');
  if (!existsSync(path)) throw new DbError(`no database at ${path}`, EXIT_CODES.usage);
  const { default: Database } = await import('better-sqlite3');
  let source;
  try {
    source = new Database(path, { readonly: true, fileMustExist: true, timeout: 5000 });
    // One read transaction (a WAL snapshot) for the whole copy: the backup reads inside it, so
    // the server's writes meanwhile neither restart the copy (as they would between steps
    // outside a transaction) nor get into it, and the server is never blocked by it.
    source.exec('begin');
    source.prepare('select count(*) from sqlite_master').get();
  } catch (err) {
    source?.close();
    throw new DbError(`cannot read ${path}: ${(err as Error).message}`, EXIT_CODES.usage);
  }
  // Created 0600 before any byte is written (a chmod afterwards would leave a window under a lax umask).
  try {
    closeSync(openSync(out, constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY, 0o600));
  } catch (err) {
    source.close();
    const code = (err as NodeJS.ErrnoException).code;
    throw new DbError(code === 'EEXIST' ? `${out} already exists` : `cannot create ${out}: ${(err as Error).message}`, EXIT_CODES.usage);
  }
  const removeCopy = () => {
    for (const suffix of ['', '-journal', '-wal', '-shm']) rmSync(`${out}${suffix}`, { force: true });
  };
  const pageSize = Number(source.pragma('page_size', { simple: true }));
  const shown = progress('copied', 'pages');
  try {
    // SQLite's online backup rather than VACUUM INTO: it copies pages (no index rebuild), shows
    // progress between steps, and writes into the 0600 file created above.
    const result = await source.backup(out, {
      progress: ({ totalPages, remainingPages }) => {
        shown.update(totalPages - remainingPages, (totalPages - remainingPages) * pageSize);
        // About 16 MiB per step with 4 KiB pages; the event loop turns between steps.
        return 4096;
      },
    });
    shown.done();
    const copy = new Database(out, { fileMustExist: true });
    let problems: string[];
    try {
      // The copy stands alone: a rollback-journal file, not WAL (no -wal/-shm beside it).
      copy.pragma('journal_mode = DELETE');
      problems = (copy.pragma('integrity_check') as Array<{ integrity_check: string }>).map((r) => r.integrity_check);
    } finally {
      copy.close();
    }
    if (problems.join() !== 'ok') throw new DbError(`the copy failed integrity_check: ${problems.join('; ')}`, EXIT_CODES.serverError);
    const mib = ((result.totalPages * pageSize) / (1 << 20)).toFixed(1);
    info(`backed up ${path} to ${out} (${result.totalPages} pages, ${mib} MiB, integrity_check ok)`);
  } catch (err) {
    shown.done();
    removeCopy();
    if (err instanceof DbError) throw err;
    throw new DbError(`backup failed: ${(err as Error).message}`, EXIT_CODES.serverError);
  } finally {
    source.close();
  }
}
