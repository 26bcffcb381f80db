import { fileURLToPath } from 'node:url';

/**
 * test/runtimes/client-scenario.mjs, the client as an app uses it, and what it must report in every
 * runtime: run by test/runtimes/client-runtimes.test.ts (the workspace build) and
 * test/packaging/client-package.test.ts (kvb-client installed from its tarball).
 */
export const CLIENT_SCENARIO = fileURLToPath(new URL('../runtimes/client-scenario.mjs', import.meta.url));

/**
 * Deno and Bun are not devDependencies (together 195 MB): .ci/run installs them with
 * `npm install --no-save deno bun`, so they are here only where their tests run. Missing, the tests
 * that need them are skipped, and say so.
 */
export const runtimeBin = (name: 'deno' | 'bun') => fileURLToPath(new URL(`../../node_modules/.bin/${name}`, import.meta.url));

/** How each runtime runs a scenario file: only what it needs (the network, the environment, reading files). */
export function scenarioCommands(scenario: string): Array<{ name: string; command: string; args: string[] }> {
  return [
    { name: 'node', command: process.execPath, args: [scenario] },
    { name: 'deno', command: runtimeBin('deno'), args: ['run', '--allow-net', '--allow-env', '--allow-read', '--no-prompt', scenario] },
    { name: 'bun', command: runtimeBin('bun'), args: [scenario] },
  ];
}

export const SCENARIO_EXPECTED = {
  max: 'bigint:9223372036854775807',
  maxRevision: true,
  bytesOk: true,
  bytesType: 'bytes',
  count: 'bigint:2',
  updated: '3',
  numberRule: 'int64:bigint',
  exactText: '3.0',
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
