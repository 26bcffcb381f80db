import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { lockFileOf } from '../../src/store/sqlite/sqlite-lock.js';

/** `npm start` in a checkout leaves its SQLite files beside package.json: git must not offer them. */
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

describe('.gitignore', () => {
  it('covers every file kvb serve makes next to its database (the file, -wal, -shm and the sidecar -lock), and packed tarballs', () => {
    const files = ['kvb.db', 'kvb.db-wal', 'kvb.db-shm', lockFileOf('kvb.db'), 'kvb-0.1.0.tgz', 'packages/client/kvb-client-0.1.0.tgz'];
    const ignored = execFileSync('git', ['check-ignore', '--no-index', ...files], { cwd: ROOT, encoding: 'utf8' })
      .trim()
      .split('\n');
    expect(ignored).toEqual(files);
  });
});
