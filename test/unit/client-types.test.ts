import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { describe, expect, it } from 'vitest';

/**
 * The types `kvb/client` publishes (dist/client/*.d.ts, through package.json "exports"), checked
 * with tsc as an app would see them: DOM and ES2022 only, no @types/node, skipLibCheck off.
 * One usage file must compile; one with a misspelled option must not, and must name the option.
 */
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const TSC = fileURLToPath(new URL('../../node_modules/typescript/bin/tsc', import.meta.url));
const check = (project: string) => execa('node', [TSC, '-p', `test/client-types/${project}`], { cwd: ROOT, reject: false, all: true });

describe('kvb/client types', () => {
  it('an app using every capability compiles, in a browser setting (no @types/node)', { timeout: 120_000 }, async () => {
    const result = await check('tsconfig.usage.json');
    expect(result.all).toBe('');
    expect(result.exitCode).toBe(0);
  });

  it('a misspelled option fails to compile, and the error names it and the right spelling', { timeout: 120_000 }, async () => {
    const result = await check('tsconfig.misspelled.json');
    expect(result.exitCode).not.toBe(0);
    expect(result.all).toMatch(
      /misspelled-option\.ts\(6,\d+\): error TS2561: .*'ifRevison' does not exist in type 'SetOptions'\. Did you mean to write 'ifRevision'\?/,
    );
    // Only that error: the rest of the file is valid.
    expect(result.all?.trim().split('\n')).toHaveLength(1);
  });
});
