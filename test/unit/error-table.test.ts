import { readFileSync, readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { exitCodeRows } from '../../src/cli/exit-codes.js';
import { ERRORS, EXIT_CODES, STORAGE_FAILURES, storageFailureOf } from '../../src/errors.js';
import { StorageUnavailableError } from '../../src/store/storage-errors.js';

/** The error table (src/errors.ts) holds every failure kvb names: read off the source, not trusted. */
const SRC = fileURLToPath(new URL('../../src/', import.meta.url));

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? sourceFiles(join(dir, entry.name)) : entry.name.endsWith('.ts') ? [join(dir, entry.name)] : [],
  );
}

const FILES = sourceFiles(SRC).map((file) => ({ path: relative(SRC, file), text: readFileSync(file, 'utf8') }));
/** Every match of `pattern`'s first group, with the file it is in. */
const found = (pattern: RegExp) => FILES.flatMap(({ path, text }) => [...text.matchAll(pattern)].map((m) => ({ path, name: m[1]! })));

describe('the error table', () => {
  it('names every storage failure code the source gives an error or compares one with', () => {
    // `readonly code = 'KVB_…'` on an error class, or `=== 'KVB_…'` where one is recognised.
    const used = found(/(?:\bcode\s*=\s*|===\s*)'(KVB_[A-Z_]+)'/g);
    expect(used.length).toBeGreaterThanOrEqual(4);
    expect(used.filter(({ name }) => !Object.hasOwn(STORAGE_FAILURES, name))).toEqual([]);
    const defined = new Set(found(/\bcode\s*=\s*'(KVB_[A-Z_]+)'/g).map(({ name }) => name));
    expect(
      Object.keys(STORAGE_FAILURES).filter((code) => !defined.has(code)),
      'table rows no error carries',
    ).toEqual([]);
  });

  it('names every error kind the server throws or sends', () => {
    const used = found(/(?:new KvbError\(|sendError\(reply, )'([a-z_]+)'/g);
    expect(used.length).toBeGreaterThan(20);
    expect(used.filter(({ name }) => !Object.hasOwn(ERRORS, name))).toEqual([]);
  });

  it('is where every exit code comes from: no number stands for one in the CLI or the client', () => {
    const literal = found(/(\bexitCode\s*[=:]\s*\d+|new DbError\([^;]*,\s*\d+\))/g).filter(({ path }) => path !== 'errors.ts');
    expect(literal).toEqual([]);
    // The pattern finds what it looks for.
    expect([
      ...'readonly exitCode = 2; process.exitCode = 1; new DbError(`x`, 5)'.matchAll(
        /(\bexitCode\s*[=:]\s*\d+|new DbError\([^;]*,\s*\d+\))/g,
      ),
    ]).toHaveLength(3);
  });

  it('gives each exit code a meaning, and each is shown once in order', () => {
    const rows = exitCodeRows();
    expect(rows.map((row) => row.code)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(rows.filter((row) => row.meaning.length < 7)).toEqual([]);
    const codes = new Set<number>(Object.values(EXIT_CODES));
    for (const { exitCode } of [...Object.values(ERRORS), ...Object.values(STORAGE_FAILURES)]) expect(codes).toContain(exitCode);
  });

  it('answers a storage outage 503 and exits 5 on it, and refuses a database it cannot use with exit 1', () => {
    const outage = storageFailureOf(new StorageUnavailableError(new Error('connection terminated')));
    expect(outage).toBe('KVB_STORAGE_UNAVAILABLE');
    expect(ERRORS[STORAGE_FAILURES.KVB_STORAGE_UNAVAILABLE.kind].status).toBe(503);
    expect(STORAGE_FAILURES.KVB_STORAGE_UNAVAILABLE.exitCode).toBe(5);
    for (const code of ['KVB_DATABASE_IN_USE', 'KVB_DATABASE_TOO_NEW', 'KVB_FOREIGN_DATABASE'] as const)
      expect(STORAGE_FAILURES[code].exitCode).toBe(1);
    expect(storageFailureOf(Object.assign(new Error('x'), { code: 'SQLITE_BUSY' }))).toBeUndefined();
    expect(storageFailureOf(Object.assign(new Error('x'), { code: 'toString' }))).toBeUndefined();
    expect(storageFailureOf(null)).toBeUndefined();
  });
});
