import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deadUrl } from '../helpers/cli.js';
import { CLIENT_SCENARIO, SCENARIO_EXPECTED, runtimeBin, scenarioCommands } from '../helpers/client-scenario.js';
import { type AppServer, startAppServer } from '../helpers/app-server.js';

/*
 * kvb/client says it runs on Node 20+, Deno and Bun (and browsers: test/browser/client-library.test.ts).
 * The same scenario (test/runtimes/client-scenario.mjs, importing the workspace's packages/client
 * build) runs under each runtime against a real server, and each must report exactly the same
 * thing. Deno and Bun are found where .ci/run installs them (test/helpers/client-scenario.ts).
 *
 * Its own step (`npm run test:runtimes`, vitest project `runtimes`), run once by .ci/run after
 * `npm test`, on SQLite: the client is under test here, not the storage behind the server.
 */

const RUNTIMES = scenarioCommands(CLIENT_SCENARIO);
const bin = runtimeBin;

for (const runtime of RUNTIMES) {
  if (!existsSync(runtime.command))
    console.warn(`client-runtimes: ${runtime.name} SKIPPED (${runtime.command} is missing: npm install --no-save deno bun)`);
}

let server: AppServer;
let dead: string;
beforeAll(async () => {
  server = await startAppServer();
  dead = await deadUrl();
});
afterAll(async () => {
  await server?.stop();
});

/** The whole client-library suite (vitest itself runs under Deno and Bun), on SQLite. */
const SUITE: Array<{ name: string; command: string; args: string[] }> = [
  {
    name: 'deno',
    command: bin('deno'),
    args: ['run', '--allow-all', '--no-prompt', fileURLToPath(new URL('../../node_modules/vitest/vitest.mjs', import.meta.url))],
  },
  { name: 'bun', command: bin('bun'), args: ['--bun', fileURLToPath(new URL('../../node_modules/vitest/vitest.mjs', import.meta.url))] },
];

describe('test/http/client-library.test.ts under Deno and Bun', () => {
  for (const runtime of SUITE) {
    it.skipIf(!existsSync(runtime.command))(`${runtime.name}: every test of the client suite passes`, { timeout: 300_000 }, async () => {
      const out = join(mkdtempSync(join(tmpdir(), 'kvb-runtime-')), 'report.json');
      const result = await execa(
        runtime.command,
        [
          ...runtime.args,
          'run',
          'test/http/client-library.test.ts',
          '--project',
          'sqlite',
          '--maxWorkers=1',
          '--reporter=json',
          `--outputFile=${out}`,
        ],
        {
          cwd: fileURLToPath(new URL('../..', import.meta.url)),
          env: { NO_COLOR: '1', DENO_NO_UPDATE_CHECK: '1' },
          reject: false,
          timeout: 290_000,
        },
      );
      expect(existsSync(out), `no report from ${runtime.name}: ${result.stderr.slice(-2000)}`).toBe(true);
      const report = JSON.parse(readFileSync(out, 'utf8')) as {
        numTotalTests: number;
        numPassedTests: number;
        numFailedTests: number;
        testResults: Array<{ assertionResults: Array<{ fullName: string; status: string; failureMessages: string[] }> }>;
      };
      const failed = report.testResults.flatMap((f) => f.assertionResults).filter((a) => a.status !== 'passed');
      expect(failed.map((a) => `${a.fullName}: ${a.failureMessages.join(' ').slice(0, 500)}`)).toEqual([]);
      expect(report.numTotalTests).toBeGreaterThanOrEqual(20);
      expect(report.numPassedTests).toBe(report.numTotalTests);
      expect(result.exitCode).toBe(0);
    });
  }
});

describe('kvb/client under each runtime it claims', () => {
  for (const runtime of RUNTIMES) {
    it.skipIf(!existsSync(runtime.command))(
      `${runtime.name}: the scenario reports the same as everywhere`,
      { timeout: 120_000 },
      async () => {
        const result = await execa(runtime.command, runtime.args, {
          env: { KVB_URL: server.url, DEAD_URL: dead, NO_COLOR: '1', DENO_NO_UPDATE_CHECK: '1' },
          reject: false,
          timeout: 110_000,
        });
        expect({ exitCode: result.exitCode, stderr: result.stderr }).toEqual({ exitCode: 0, stderr: '' });
        expect(JSON.parse(result.stdout)).toEqual(SCENARIO_EXPECTED);
      },
    );
  }
});
