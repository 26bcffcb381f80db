import { readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { kvb } from '../helpers/cli.js';

const CACHE_DIR = fileURLToPath(new URL('../../dist/.code-cache/', import.meta.url));

/** This command's cache files for the current bundle (any Node flags), newest first. */
function cachesOf(command: string): string[] {
  let names: string[] = [];
  try {
    names = readdirSync(CACHE_DIR);
  } catch {
    return [];
  }
  return names
    .filter((name) => name.startsWith(`kvb-cli.${command}-`) && name.endsWith('.bin'))
    .map((name) => join(CACHE_DIR, name))
    .sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs);
}

describe("the bundles' V8 code cache (src/bundle/load-bundle.ts)", () => {
  it("a run writes its command's cache; a corrupt cache is rejected, the command still works, and the cache is rewritten", {
    timeout: 60_000,
  }, async () => {
    const first = await kvb(['completion', 'bash']);
    expect(first.exitCode, first.stderr).toBe(0);
    const caches = cachesOf('completion');
    expect(caches.length).toBeGreaterThan(0);

    // Every cache of the command (whatever Node flags made it) is overwritten with bytes V8 rejects.
    const garbage = (file: string) => Buffer.alloc(statSync(file).size, 0x5a);
    for (const file of caches) writeFileSync(file, garbage(file));
    const again = await kvb(['completion', 'bash']);
    expect(again.exitCode, again.stderr).toBe(0);
    expect(again.stderr).toBe('');
    expect(again.out).toBe(first.out);
    expect(cachesOf('completion').some((file) => !readFileSync(file).equals(garbage(file)))).toBe(true);
  });

  it('KVB_CODE_CACHE=off runs without one; a failed command (a mistyped name) leaves no cache behind', { timeout: 60_000 }, async () => {
    const off = await kvb(['--version'], { env: { KVB_CODE_CACHE: 'off' } });
    expect(off.exitCode).toBe(0);
    expect(off.out.trim()).toMatch(/^\d+\.\d+\.\d+/);

    const typo = await kvb(['gett', 'k']);
    expect(typo.exitCode).toBe(1);
    expect(cachesOf('gett')).toEqual([]);
  });
});
