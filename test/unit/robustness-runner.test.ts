import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { describe, expect, it } from 'vitest';

/**
 * `npm run robustness` never passes silently: a scenario whose service is missing says SKIPPED
 * with the reason, and fails the run under --require-services (as .ci/run runs it).
 */
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const TSX = fileURLToPath(new URL('../../node_modules/.bin/tsx', import.meta.url));

/** The runner with no PostgreSQL, PgBouncer or HA cluster in its environment. */
function runner(args: string[]) {
  const env = { ...process.env };
  for (const name of [
    'KVB_TEST_POSTGRES_URL',
    'KVB_TEST_PGBOUNCER_URL',
    'KVB_TEST_HA_URL',
    'KVB_TEST_HA_PGBOUNCER_URL',
    'KVB_TEST_HA_DIR',
    'KVB_TEST_BACKEND',
  ])
    delete env[name];
  return execa(TSX, ['test/robustness/run.ts', ...args], { cwd: ROOT, env, extendEnv: false, reject: false, timeout: 60_000 });
}

describe('the robustness runner', () => {
  it('says SKIPPED, with the reason, for a scenario whose database is missing, and counts it in its closing line', {
    timeout: 70_000,
  }, async () => {
    const run = await runner(['--scenario', 'pg2-none,ha2-switchover,ha2-pgbouncer-switchover']);
    expect(run.stdout).toContain('== pg2-none: SKIPPED (no PostgreSQL: KVB_TEST_POSTGRES_URL is not set)');
    expect(run.stdout).toContain('== ha2-switchover: SKIPPED (no HA cluster');
    expect(run.stdout).toContain('== ha2-pgbouncer-switchover: SKIPPED (no HA cluster with PgBouncers');
    expect(run.stdout.trim().split('\n').at(-1)).toBe('robustness: 0 passed, 0 failed, 3 skipped');
    expect(run.exitCode).toBe(0);
  });

  it('fails a skipped scenario under --require-services', { timeout: 70_000 }, async () => {
    const run = await runner(['--scenario', 'pgbouncer2-kill', '--require-services']);
    expect(run.stdout).toContain('pgbouncer2-kill: SKIPPED but --require-services');
    expect(run.exitCode).toBe(1);
  });

  it('refuses an unknown scenario with exit status 2', { timeout: 70_000 }, async () => {
    const run = await runner(['--scenario', 'no-such-scenario']);
    expect(run.stderr).toContain('unknown scenario no-such-scenario');
    expect(run.exitCode).toBe(2);
  });
});
