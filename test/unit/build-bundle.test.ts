import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { describe, expect, it } from 'vitest';

/** scripts/build-bundle.mjs, run as `npm run build` runs it, into a temp directory (dist/ is left alone). */
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

describe('the bundle build', () => {
  it("prints no warning, and leaves Swagger UI's package.json to be found in node_modules at run time", { timeout: 240_000 }, async () => {
    const out = mkdtempSync(join(tmpdir(), 'kvb-bundle-'));
    try {
      const result = await execa('node', ['scripts/build-bundle.mjs', '--outdir', out], { cwd: ROOT, all: true, reject: false });
      expect(result.exitCode, result.all).toBe(0);
      expect(result.all).toBe('');
      const server = readFileSync(join(out, 'kvb-server.cjs'), 'latin1');
      expect(server).toContain('require.resolve("@fastify/swagger-ui/package.json")');
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });
});
