import { spawnSync } from 'node:child_process';
import { expect } from 'vitest';
import { type DocBlock, expectedOutput } from './doc-blocks.js';

/**
 * Runs a docs block marked `<!-- docs-test: install -->` as a reader would, with `replace`
 * applied (a checkout's path, a scratch directory for /opt/kvb, a server's URL), then checks it
 * exited 0, printed each after-command comment in order, and that npm warned about nothing
 * (npm's `notice` lines, the contents of a packed tarball, are all it may print on stderr).
 */
export function runInstallBlock(
  block: DocBlock,
  options: { cwd: string; replace: Record<string, string>; env?: NodeJS.ProcessEnv; timeoutMs: number },
): { stdout: string; stderr: string } {
  let script = block.text;
  for (const [from, to] of Object.entries(options.replace)) script = script.replaceAll(from, to);
  const result = spawnSync('bash', ['-e', '-o', 'pipefail', '-c', script], {
    cwd: options.cwd,
    encoding: 'utf8',
    timeout: options.timeoutMs,
    env: { ...process.env, ...options.env },
  });
  const where = `${block.page}:${block.line}`;
  expect(result.status, `${where} exit status; stderr: ${result.stderr}`).toBe(0);
  const unexpected = result.stderr.split('\n').filter((line) => line.trim() !== '' && !line.startsWith('npm notice'));
  expect(unexpected, `${where} printed on stderr`).toEqual([]);
  let rest = result.stdout;
  for (const text of expectedOutput(block.text)) {
    const at = rest.indexOf(text);
    expect(at, `${where}: "${text}" in ${JSON.stringify(result.stdout.slice(0, 2000))}`).toBeGreaterThanOrEqual(0);
    rest = rest.slice(at + text.length);
  }
  return { stdout: result.stdout, stderr: result.stderr };
}
