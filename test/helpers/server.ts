import { execa, type ResultPromise } from 'execa';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SERVER_POSTGRES_URL, TEST_BACKEND, dropSchema, postgresUrl, uniqueName } from './backend.js';

export const KVB_BIN = fileURLToPath(new URL('../../bin/kvb', import.meta.url));

export interface RunningServer {
  /** e.g. http://127.0.0.1:41234 */
  url: string;
  /** e.g. http://127.0.0.1:41234/api/v1 */
  api: string;
  dataDir: string;
  /** The `--db` value: a SQLite file, or a PostgreSQL URL (with `?schema=`). Give it to another server to share the store. */
  db: string;
  backend: 'sqlite' | 'postgres';
  /** PostgreSQL: this process's application_name, so a test can find (and kill) only its connections. */
  applicationName?: string;
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

const isPostgres = (db: string) => /^postgres(ql)?:\/\//.test(db);

/** Spawns the real `kvb serve` on a free port with a temp database and waits until it listens. */
export async function startServer(options: StartOptions = {}): Promise<RunningServer> {
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), 'kvb-test-'));
  let ownSchema: string | undefined;
  let db = options.db;
  if (db === undefined && TEST_BACKEND === 'postgres') {
    ownSchema = uniqueName('kvb_test');
    db = postgresUrl({ schema: ownSchema }, SERVER_POSTGRES_URL);
  }
  db ??= join(dataDir, 'kvb.db');
  let applicationName: string | undefined;
  let dbArg = db;
  if (isPostgres(db)) {
    applicationName = uniqueName('kvb_server');
    dbArg = postgresUrl({ application_name: applicationName }, db);
  }
  const child = execa('node', [KVB_BIN, 'serve', '--port', '0', '--host', '127.0.0.1', '--db', dbArg, ...(options.args ?? [])], {
    env: { KVB_LOG_LEVEL: 'info', ...options.env },
    extendEnv: true,
    reject: false,
    all: true,
    buffer: false,
  });
  let output = '';
  child.all?.setEncoding('utf8');
  const url = await new Promise<string>((resolve, reject) => {
    if (ownSchema) {
      // A server that never started leaves no schema behind (later calls, once it has started, are no-ops).
      const schema = ownSchema;
      const failed = reject;
      const started = resolve;
      let settled = false;
      resolve = (value) => {
        settled = true;
        started(value);
      };
      reject = (err) => {
        if (settled) return;
        settled = true;
        void dropSchema(schema).finally(() => failed(err));
      };
    }
    const timer = setTimeout(() => {
      // A server that misses the deadline must not live on (listening, holding connections) after the test gave up.
      child.kill('SIGKILL');
      reject(new Error(`kvb serve did not start in time:\n${output}`));
    }, 15_000);
    child.all?.on('data', (chunk: string) => {
      output += chunk;
      const match = /listening on (https?:\/\/[^\s"]+)/.exec(output);
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
    db,
    backend: isPostgres(db) ? 'postgres' : 'sqlite',
    ...(applicationName && { applicationName }),
    logs: () => output,
    process: child,
    async stop({ keepData = false, signal = 'SIGTERM' } = {}) {
      if (child.exitCode === null) child.kill(signal);
      const result = await child;
      if (!keepData && !options.dataDir) rmSync(dataDir, { recursive: true, force: true });
      if (!keepData && ownSchema) await dropSchema(ownSchema);
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
