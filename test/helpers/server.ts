import { execa, type ResultPromise } from 'execa';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const KVB_BIN = fileURLToPath(new URL('../../bin/kvb', import.meta.url));

export interface RunningServer {
  /** e.g. http://127.0.0.1:41234 */
  url: string;
  /** e.g. http://127.0.0.1:41234/api/v1 */
  api: string;
  dataDir: string;
  /** Everything the server printed so far (stdout and stderr). */
  logs(): string;
  process: ResultPromise;
  /** SIGTERM, wait for exit; returns the exit code. Removes the data dir unless keepData. */
  stop(options?: { keepData?: boolean; signal?: NodeJS.Signals }): Promise<number | undefined>;
}

export interface StartOptions {
  /** Extra `kvb serve` arguments. */
  args?: string[];
  env?: Record<string, string>;
  /** Reuse a data dir (for restart tests). */
  dataDir?: string;
  /** Database URL; defaults to a SQLite file in the data dir (or KVB_TEST_DB_URL when a suite sets it). */
  db?: string;
}

/** Spawns the real `kvb serve` on a free port with a temp database and waits until it listens. */
export async function startServer(options: StartOptions = {}): Promise<RunningServer> {
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), 'kvb-test-'));
  const db = options.db ?? join(dataDir, 'kvb.db');
  const child = execa(
    'node',
    [KVB_BIN, 'serve', '--port', '0', '--host', '127.0.0.1', '--db', db, ...(options.args ?? [])],
    {
      env: { KVB_LOG_LEVEL: 'info', ...options.env },
      extendEnv: true,
      reject: false,
      all: true,
      buffer: false,
    },
  );
  let output = '';
  child.all?.setEncoding('utf8');
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`kvb serve did not start in time:\n${output}`)), 15_000);
    child.all?.on('data', (chunk: string) => {
      output += chunk;
      const match = /listening on (http:\/\/[^\s"]+)/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]!);
      }
    });
    void child.then((result) => {
      clearTimeout(timer);
      reject(new Error(`kvb serve exited early (${result.exitCode}):\n${output}`));
    });
  });
  return {
    url,
    api: `${url}/api/v1`,
    dataDir,
    logs: () => output,
    process: child,
    async stop({ keepData = false, signal = 'SIGTERM' } = {}) {
      if (child.exitCode === null) child.kill(signal);
      const result = await child;
      if (!keepData && !options.dataDir) rmSync(dataDir, { recursive: true, force: true });
      return result.exitCode;
    },
  };
}
