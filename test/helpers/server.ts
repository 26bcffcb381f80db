import { execa, type ResultPromise } from 'execa';
import { fileURLToPath } from 'node:url';
import { type TestDatabase, testDatabase } from './test-database.js';

export const KVB_BIN = fileURLToPath(new URL('../../bin/kvb', import.meta.url));

export interface RunningServer extends Pick<TestDatabase, 'dataDir' | 'db' | 'backend' | 'applicationName'> {
  /** e.g. http://127.0.0.1:41234 */
  url: string;
  /** e.g. http://127.0.0.1:41234/api/v1 */
  api: string;
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
  /**
   * Database URL. By default: a SQLite file in the data dir, or, in the `postgres` test project, a
   * fresh schema of KVB_TEST_POSTGRES_URL that `stop()` drops. A server given another's `db` shares it.
   */
  db?: string;
}

/**
 * Spawns the real `kvb serve` on a free port with a temp database and waits for its "listening"
 * line or its exit, whichever comes first. No deadline of its own: a start that hangs is the
 * test's timeout, and execa kills the server when the test process exits (its `cleanup`).
 */
export async function startServer(options: StartOptions = {}): Promise<RunningServer> {
  const database = testDatabase({ db: options.db, dataDir: options.dataDir });
  const child = execa(
    'node',
    [KVB_BIN, 'serve', '--port', '0', '--host', '127.0.0.1', '--db', database.connectWith, ...(options.args ?? [])],
    {
      // The drain's 1 s grace for idle keep-alive connections (a request may be on its way) costs a
      // second per stop; a test's stop comes after its requests, so the grace is 1 ms unless a test
      // that drains under load sets its own.
      env: { KVB_LOG_LEVEL: 'info', KVB_DRAIN_IDLE_GRACE_MS: '1', ...options.env },
      extendEnv: true,
      reject: false,
      all: true,
      buffer: false,
    },
  );
  let output = '';
  child.all?.setEncoding('utf8');
  let url: string;
  try {
    url = await new Promise<string>((resolve, reject) => {
      child.all?.on('data', (chunk: string) => {
        output += chunk;
        const match = /listening on (https?:\/\/[^\s"]+)/.exec(output);
        if (match) resolve(match[1]!);
      });
      void child.then((result) => reject(new Error(`kvb serve exited early (${result.exitCode}):\n${output}`)));
    });
  } catch (err) {
    // A server that never started leaves no data dir or schema behind.
    await database.remove();
    throw err;
  }
  const { dataDir, db, backend, applicationName } = database;
  return {
    url,
    api: `${url}/api/v1`,
    dataDir,
    db,
    backend,
    ...(applicationName && { applicationName }),
    logs: () => output,
    process: child,
    async stop({ keepData = false, signal = 'SIGTERM' } = {}) {
      if (child.exitCode === null) child.kill(signal);
      const result = await child;
      await database.remove({ keepData });
      return result.exitCode;
    },
  };
}

/** Every key row in the server's database, straight from storage (the server should be stopped, with keepData). */
export async function storedKeys(server: Pick<RunningServer, 'backend' | 'db'>): Promise<string[]> {
  if (server.backend === 'postgres') {
    const schema = new URL(server.db).searchParams.get('schema') ?? 'public';
    const { withAdminClient } = await import('./backend.js');
    const { rows } = await withAdminClient((client) => client.query<{ key: Buffer }>(`select key from "${schema}".entries order by key`));
    return rows.map((r) => r.key.toString());
  }
  const { default: Database } = await import('better-sqlite3');
  const db = new Database(server.db, { readonly: true });
  const rows = db.prepare('select key from entries order by key').all() as Array<{ key: Buffer }>;
  db.close();
  return rows.map((r) => r.key.toString());
}
