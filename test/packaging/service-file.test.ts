import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { KVB_BIN } from '../helpers/server.js';

/**
 * contrib/kvb.service is a unit systemd accepts (`systemd-analyze verify`, the real
 * tool), hardened, and the one docs/operations.md points to (the README's old inline unit had two ExecStart=).
 */
const UNIT = new URL('../../contrib/kvb.service', import.meta.url).pathname;
const OPERATIONS = new URL('../../docs/operations.md', import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), 'kvb-unit-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Whether systemd-analyze runs here: it verifies a trivial unit. */
function analyzerProblem(): string | undefined {
  const probe = join(dir, 'probe.service');
  writeFileSync(probe, '[Service]\nExecStart=/bin/true\n');
  const run = spawnSync('systemd-analyze', ['verify', '--man=no', probe], { encoding: 'utf8' });
  if (run.error) return `systemd-analyze is not available (${run.error.message})`;
  if (run.status !== 0) return `systemd-analyze cannot verify units here (${`${run.stderr}`.trim().split('\n')[0]})`;
  return undefined;
}
const problem = analyzerProblem();
if (problem) console.log(`systemd unit test: SKIPPED, ${problem}`);

const text = readFileSync(UNIT, 'utf8');
const settings = (name: string) => [...text.matchAll(new RegExp(`^${name}=(.*)$`, 'gm'))].map((m) => m[1]!);

describe('contrib/kvb.service', () => {
  it.skipIf(problem !== undefined)(
    "systemd-analyze verify accepts it (ExecStart pointed at this checkout's kvb), and refuses a second ExecStart=",
    () => {
      const unit = join(dir, 'kvb.service');
      writeFileSync(unit, text.replace(/^ExecStart=\S+/m, `ExecStart=${KVB_BIN}`));
      const run = spawnSync('systemd-analyze', ['verify', '--man=no', unit], { encoding: 'utf8' });
      expect(`${run.stdout}${run.stderr}`.trim()).toBe('');
      expect(run.status).toBe(0);
      // The check can fail: the README's old unit (two ExecStart= lines) is refused.
      const doubled = join(dir, 'doubled.service');
      writeFileSync(doubled, text.replace(/^ExecStart=\S+ serve$/m, `ExecStart=${KVB_BIN} serve\nExecStart=${KVB_BIN} serve`));
      const refused = spawnSync('systemd-analyze', ['verify', '--man=no', doubled], { encoding: 'utf8' });
      expect(refused.status).not.toBe(0);
      expect(refused.stderr).toContain('more than one ExecStart=');
    },
  );

  it('is hardened: its own user, a read-only system, a state directory, no new privileges, a file limit, a drain on stop', () => {
    expect(settings('ExecStart')).toEqual(['/usr/local/bin/kvb serve']);
    expect(settings('DynamicUser')).toEqual(['yes']);
    expect(settings('ProtectSystem')).toEqual(['strict']);
    expect(settings('StateDirectory')).toEqual(['kvb']);
    expect(settings('NoNewPrivileges')).toEqual(['yes']);
    expect(Number(settings('LimitNOFILE')[0])).toBeGreaterThanOrEqual(65536);
    expect(settings('KillSignal')).toEqual(['SIGTERM']);
    expect(settings('ExecReload')).toEqual(['/bin/kill -HUP $MAINPID']);
    // The database lives in the state directory, the only place it may write.
    expect(settings('Environment')).toContain('KVB_DB=/var/lib/kvb/kvb.db');
    expect(settings('Environment')).toContain('KVB_HOST=127.0.0.1');
  });

  it('the operations guide points to it and shows no unit of its own', () => {
    const guide = readFileSync(OPERATIONS, 'utf8');
    expect(guide).toContain('contrib/kvb.service');
    expect(guide).not.toMatch(/^ExecStart=/m);
  });
});
