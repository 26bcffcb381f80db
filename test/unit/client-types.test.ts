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
  it('an app using every capability compiles, in a browser setting (no @types/node), with its documents declared as interfaces', {
    timeout: 120_000,
  }, async () => {
    const result = await check('tsconfig.usage.json');
    expect(result.all).toBe('');
    expect(result.exitCode).toBe(0);
  });

  it('typed reads and writes take interfaces, nested interfaces, optional fields and arrays (no index signature needed)', {
    timeout: 120_000,
  }, async () => {
    // interfaces.ts is compiled with usage.ts above; this one proves what the constraint still refuses.
    const result = await check('tsconfig.not-json.json');
    expect(result.exitCode).not.toBe(0);
    const errors = (result.all ?? '').split('\n').filter((line) => line.startsWith('test/client-types/'));
    expect(errors).toHaveLength(2);
    expect(errors[0]).toMatch(/not-json\.ts\(16,\d+\): error TS2344: Type 'Dated' does not satisfy the constraint/);
    expect(errors[1]).toMatch(/not-json\.ts\(17,\d+\): error TS2344: Type 'WithMethod' does not satisfy the constraint/);
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
