import { execa } from 'execa';
import { existsSync, lstatSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KVB_BIN, startServer } from '../helpers/server.js';

/** `kvb db dump -o` writes credential hashes and signing keys: it must never write through a link or over a file unasked. */
const db = (args: string[]) => execa('node', [KVB_BIN, 'db', ...args], { reject: false, env: { KVB_DB: '' } });

let dir: string;
let source: string;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'kvb-dump-out-'));
  const server = await startServer({ db: join(dir, 'source.db') });
  await server.stop({ keepData: true });
  source = server.db;
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('kvb db dump -o refuses symlinks and existing files (as kvb db backup does)', () => {
  it('refuses a symlink to an existing file, leaving its target untouched', async () => {
    const target = join(dir, 'precious.txt');
    writeFileSync(target, 'keep me');
    const link = join(dir, 'link.dump');
    symlinkSync(target, link);
    const res = await db(['dump', '--db', source, '-o', link]);
    expect(res.exitCode).toBe(1);
    expect(res.stderr).toContain('is a symbolic link');
    expect(readFileSync(target, 'utf8')).toBe('keep me');
    // Not even --force writes through a link.
    expect((await db(['dump', '--db', source, '-o', link, '--force'])).exitCode).toBe(1);
    expect(readFileSync(target, 'utf8')).toBe('keep me');
  });

  it('refuses a dangling symlink without creating its target', async () => {
    const link = join(dir, 'dangling.dump');
    const target = join(dir, 'created-by-link');
    symlinkSync(target, link);
    const res = await db(['dump', '--db', source, '-o', link]);
    expect(res.exitCode).toBe(1);
    expect(existsSync(target)).toBe(false);
    expect(lstatSync(link).isSymbolicLink()).toBe(true);
  });

  it('refuses an existing file without --force; --force replaces a regular file (0600), never a directory', async () => {
    const file = join(dir, 'old.dump');
    writeFileSync(file, 'old', { mode: 0o644 });
    const refused = await db(['dump', '--db', source, '-o', file]);
    expect(refused.exitCode).toBe(1);
    expect(refused.stderr).toContain('already exists');
    expect(readFileSync(file, 'utf8')).toBe('old');
    const forced = await db(['dump', '--db', source, '-o', file, '--force']);
    expect(forced.exitCode, forced.stderr).toBe(0);
    expect(readFileSync(file, 'utf8')).toContain('"kvb":"dump"');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const sub = join(dir, 'a-directory');
    mkdirSync(sub);
    expect((await db(['dump', '--db', source, '-o', sub, '--force'])).stderr).toContain('not a regular file');
  });
});
