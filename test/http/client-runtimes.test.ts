import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deadUrl } from '../helpers/cli.js';
import { type RunningServer, startServer } from '../helpers/server.js';

/*
 * kvb/client says it runs on Node 20+, Deno and Bun (and browsers: test/browser/client-library.test.ts).
 * The same scenario (test/runtimes/client-scenario.mjs, importing the built dist/client) runs
 * under each runtime against a real server, and each must report exactly the same thing. Deno and
 * Bun come from the npm packages `deno` and `bun` (devDependencies), not a global install.
 */

const SCENARIO = fileURLToPath(new URL('../runtimes/client-scenario.mjs', import.meta.url));
const bin = (name: string) => fileURLToPath(new URL(`../../node_modules/.bin/${name}`, import.meta.url));

const RUNTIMES: Array<{ name: string; command: string; args: string[] }> = [
  { name: 'node', command: process.execPath, args: [SCENARIO] },
  // Only what the scenario needs: the network (the server), the environment (KVB_URL), the built files.
  { name: 'deno', command: bin('deno'), args: ['run', '--allow-net', '--allow-env', '--allow-read', '--no-prompt', SCENARIO] },
  { name: 'bun', command: bin('bun'), args: [SCENARIO] },
];

for (const runtime of RUNTIMES) {
  if (!existsSync(runtime.command)) console.warn(`client-runtimes: ${runtime.name} SKIPPED (${runtime.command} is missing: npm install)`);
}

let server: RunningServer;
let dead: string;
beforeAll(async () => {
  server = await startServer();
  dead = await deadUrl();
});
afterAll(async () => {
  await server?.stop();
});

const EXPECTED = {
  max: 'bigint:9223372036854775807',
  maxRevision: true,
  bytesOk: true,
  bytesType: 'bytes',
  count: 'bigint:2',
  updated: '3',
  stale: '412 current true',
  keys: ['bytes', 'doc', 'float', 'max', 'text', 'visits'],
  listed: ['float=1.5:float64'],
  many: ['max=9223372036854775807:int64', 'text=héllo:text', null],
  manyRevision: true,
  expired: true,
  textExpires: true,
  persisted: true,
  notLive: false,
  pruned: 3,
  watched: 'set w/done number',
  lockValue: true,
  afterRelease: null,
  commit: 'doc',
  deleted: true,
  doc: null,
  missing: '404 no such bucket',
  // An unreachable server is a KvbNetworkError in every runtime (Deno's fetch gives only text).
  unreachable: 'KvbNetworkError connection refused',
};

describe('kvb/client under each runtime it claims', () => {
  for (const runtime of RUNTIMES) {
    it.skipIf(!existsSync(runtime.command))(`${runtime.name}: the scenario reports the same as everywhere`, { timeout: 120_000 }, async () => {
      const result = await execa(runtime.command, runtime.args, {
        env: { KVB_URL: server.url, DEAD_URL: dead, NO_COLOR: '1', DENO_NO_UPDATE_CHECK: '1' },
        reject: false,
        timeout: 110_000,
      });
      expect({ exitCode: result.exitCode, stderr: result.stderr }).toEqual({ exitCode: 0, stderr: '' });
      expect(JSON.parse(result.stdout)).toEqual(EXPECTED);
    });
  }
});
