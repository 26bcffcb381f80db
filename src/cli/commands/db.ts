import { EXIT_CODES, STORAGE_FAILURES, storageFailureOf } from '../../errors.js';
import { defineCommand, defineGroup, examples } from '../define-command.js';
import { counted, data, info } from '../output.js';
import { backupSqliteFile } from './db-backup.js';
import { DbError } from './db-error.js';

/*
 * `kvb db …`: operator commands on the server's machine. They open the storage directly (the
 * same store code `kvb serve` runs, loaded only when a command runs), not over HTTP: the only
 * cli -> store imports, allowed for this file by test/unit/import-direction.test.ts.
 */

const DB_HELP = 'SQLite file path, sqlite:PATH, or postgres://… URL (env KVB_DB)';

/**
 * Opens the store for a command. `access` (SQLite): 'read' reads beside a running kvb serve (dump,
 * check); 'own' takes the file's lock and is refused while a server holds it (restore).
 */
async function withStore<T>(
  url: string | undefined,
  access: 'own' | 'read',
  run: (store: import('../../store/store.js').Store) => Promise<T>,
  options: { create?: boolean } = {},
): Promise<T> {
  const db = url ?? process.env.KVB_DB;
  if (!db) throw new DbError('no database given: pass --db (a SQLite file or a postgres:// URL) or set KVB_DB', EXIT_CODES.usage);
  const { openStore } = await import('../../store/open-store.js');
  const missing = await missingSqliteFile(db);
  // Reading a file that is not there is a typo; restoring or migrating into one makes it, as kvb serve does.
  if (missing !== undefined && !options.create) throw new DbError(`no database at ${db}`, EXIT_CODES.usage);
  if (missing !== undefined) info(`creating a new SQLite database at ${missing}`);
  let store;
  try {
    store = await openStore(db, { durability: 'full', poolSize: 2, access });
  } catch (err) {
    const message = (err as Error).message;
    const failure = storageFailureOf(err);
    const locked = failure === 'KVB_DATABASE_IN_USE' || /locked|busy/i.test(message);
    const exitCode = locked ? EXIT_CODES.usage : failure !== undefined ? STORAGE_FAILURES[failure].exitCode : EXIT_CODES.serverError;
    throw new DbError(
      `cannot open ${db.replace(/\/\/[^@/]*@/, '//…@')}: ${message}${locked ? ' (stop the kvb serve that holds it first)' : ''}`,
      exitCode,
    );
  }
  try {
    return await run(store);
  } catch (err) {
    if (err instanceof DbError) throw err;
    const kind = (err as { kind?: unknown }).kind;
    throw new DbError((err as Error).message, kind === 'bad_request' ? EXIT_CODES.usage : EXIT_CODES.serverError);
  } finally {
    await store.close();
  }
}

/** The SQLite file a `--db` value names when it does not exist yet (undefined for PostgreSQL, :memory: or an existing file). */
async function missingSqliteFile(db: string): Promise<string | undefined> {
  const { parseDbTarget } = await import('../../store/open-store.js');
  let target;
  try {
    target = parseDbTarget(db);
  } catch (err) {
    throw new DbError((err as Error).message, EXIT_CODES.usage);
  }
  if (target.kind !== 'sqlite' || target.path === ':memory:') return undefined;
  const { existsSync } = await import('node:fs');
  return existsSync(target.path) ? undefined : target.path;
}

async function* linesOf(file: string): AsyncGenerator<string> {
  const { createReadStream } = await import('node:fs');
  const { createInterface } = await import('node:readline');
  let last: string | undefined;
  let first = true;
  for await (const line of createInterface({ input: createReadStream(file), crlfDelay: Number.POSITIVE_INFINITY })) {
    if (!first) yield last!;
    last = line;
    first = false;
  }
  if (last !== undefined) yield last;
}

/**
 * Creates a new 0600 file for a dump (which holds credential hashes and signing keys). A symlink
 * (dangling too) is never followed, and an existing file is replaced only with `force` and only
 * when it is a regular file: O_EXCL|O_NOFOLLOW leaves no window for a link planted meanwhile.
 */
async function createPrivateFile(path: string, force: boolean) {
  const { constants } = await import('node:fs');
  const { lstat, open, unlink } = await import('node:fs/promises');
  const existing = await lstat(path).catch(() => undefined);
  if (existing?.isSymbolicLink()) throw new DbError(`${path} is a symbolic link; refusing to write a dump through it`, EXIT_CODES.usage);
  if (existing && !force) throw new DbError(`${path} already exists (pass --force to replace a regular file)`, EXIT_CODES.usage);
  if (existing && !existing.isFile()) throw new DbError(`${path} is not a regular file; refusing to replace it`, EXIT_CODES.usage);
  if (existing) await unlink(path);
  try {
    return await open(path, constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY | constants.O_NOFOLLOW, 0o600);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST' || code === 'ELOOP')
      throw new DbError(`${path} appeared while the dump started (a file or symlink); refusing it`, EXIT_CODES.usage);
    throw new DbError(`cannot create ${path}: ${(err as Error).message}`, EXIT_CODES.usage);
  }
}

const SECRETS_KEY_HELP = "a file holding 64 hex digits (openssl rand -hex 32): the key webhooks' signing secrets are sealed with";

/** The operator's key for webhook secrets (store/dump-webhooks.ts), or undefined without the option. */
async function secretsKey(path: string | undefined): Promise<Buffer | undefined> {
  if (path === undefined) return undefined;
  const { readFile } = await import('node:fs/promises');
  const { secretsKeyOf } = await import('../../store/dump-webhooks.js');
  const text = await readFile(path, 'utf8').catch((err: NodeJS.ErrnoException) => {
    throw new DbError(`cannot read ${path}: ${err.code ?? err.message}`, EXIT_CODES.usage);
  });
  try {
    return secretsKeyOf(text);
  } catch (err) {
    throw new DbError(`${path}: ${(err as Error).message}`, EXIT_CODES.usage);
  }
}

/** What a dump says of its webhooks, when it has any. */
const webhooksDumped = (n: number, sealed: boolean) =>
  n === 0 ? '' : `, ${counted(n, 'webhook')} (${sealed ? 'secrets sealed' : 'secrets left out: --secrets-key-file keeps them'})`;

const dump = defineCommand({
  define: (parent) =>
    parent
      .command('dump')
      .description('write every bucket (policy, credential hashes, signing key) and every key to a dump file')
      .option('--db <url>', DB_HELP)
      .option('-o, --output <file>', 'write to this new file (created 0600) instead of stdout; a symlink or an existing file is refused')
      .option('--force', 'with -o: replace an existing regular file (never a symlink)')
      .option('--secrets-key-file <file>', SECRETS_KEY_HELP)
      .addHelpText(
        'after',
        `
A dump holds credential hashes and signing keys: whoever reads it can mint
tokens for every bucket in it. Keep it like a password. It runs beside a
running kvb serve (SQLite or PostgreSQL): each bucket is read from its own
consistent snapshot while the server keeps serving. Webhooks' signing
secrets are never written in clear: sealed with --secrets-key-file's key,
or left out (restored paused until the secret is rotated).
${examples('kvb db dump --db /var/lib/kvb/kvb.db -o kvb.dump', 'kvb db dump --db postgres://kvb@db/kvb > kvb.dump', 'kvb db dump --secrets-key-file /etc/kvb/dump.key -o kvb.dump')}`,
      ),
  async run(options) {
    const key = await secretsKey(options.secretsKeyFile);
    await withStore(options.db, 'read', async (store) => {
      const { dumpStore } = await import('../../store/dump.js');
      if (options.output === undefined) {
        const counts = await dumpStore(store, data, Date.now(), key);
        info(`dumped ${counted(counts.buckets, 'bucket')}, ${counted(counts.entries, 'key')}${webhooksDumped(counts.webhooks, !!key)}`);
        return;
      }
      const { rm } = await import('node:fs/promises');
      const file = await createPrivateFile(options.output, options.force === true);
      try {
        let pending = '';
        const counts = await dumpStore(
          store,
          async (chunk) => {
            pending += chunk;
            if (pending.length >= 1 << 20) {
              await file.write(pending);
              pending = '';
            }
          },
          Date.now(),
          key,
        );
        await file.write(pending);
        await file.sync();
        info(
          `dumped ${counted(counts.buckets, 'bucket')}, ${counted(counts.entries, 'key')}${webhooksDumped(counts.webhooks, !!key)} to ${options.output}`,
        );
      } catch (err) {
        await file.close();
        await rm(options.output, { force: true });
        throw err;
      }
      await file.close();
    });
  },
});

const restore = defineCommand({
  define: (parent) =>
    parent
      .command('restore')
      .description('restore a dump into a database (checked whole first; refuses a non-empty database without --force)')
      .argument('<file>', 'the dump file')
      .option('--db <url>', DB_HELP)
      .option('--force', 'restore into a database that already holds buckets (buckets of the same id are replaced)')
      .option('--secrets-key-file <file>', `${SECRETS_KEY_HELP} (the dump's)`)
      .addHelpText(
        'after',
        `
A SQLite file is refused while a kvb serve holds it (stop the server first).
A webhook whose secret the dump left out, or sealed while no key is given,
comes back paused: rotate its secret, then resume it.
${examples('kvb db restore --db postgres://kvb@db/kvb kvb.dump', 'kvb db restore --db ./kvb.db kvb.dump --force')}`,
      ),
  async run(file, options) {
    const { existsSync } = await import('node:fs');
    if (!existsSync(file)) throw new DbError(`cannot read ${file}`, EXIT_CODES.usage);
    const { restoreDump, storeIsEmpty, verifyDump } = await import('../../store/dump.js');
    const key = await secretsKey(options.secretsKeyFile);
    // Checked whole before anything is opened or written: a dump cut short or altered (or a key
    // that does not open its secrets) changes nothing, and creates no new database file either.
    let withoutSecret = 0;
    try {
      ({ withoutSecret } = await verifyDump(linesOf(file), key));
    } catch (err) {
      throw new DbError(
        (err as Error).message,
        (err as { kind?: unknown }).kind === 'bad_request' ? EXIT_CODES.usage : EXIT_CODES.serverError,
      );
    }
    await withStore(
      options.db,
      'own',
      async (store) => {
        if (!options.force && !(await storeIsEmpty(store))) {
          throw new DbError('the database already holds buckets or keys: restore into an empty one, or pass --force', EXIT_CODES.usage);
        }
        const counts = await restoreDump(store, linesOf(file), { force: options.force === true, secretsKey: key });
        const paused = withoutSecret === 0 ? '' : `; ${withoutSecret} without their secret are paused until it is rotated`;
        const hooks = counts.webhooks === 0 ? '' : `, ${counted(counts.webhooks, 'webhook')}${paused}`;
        info(
          `restored ${counted(counts.buckets, 'bucket')}, ${counted(counts.entries, 'key')} (${counts.skipped} already expired were skipped)${hooks}`,
        );
      },
      { create: true },
    );
  },
});

const check = defineCommand({
  define: (parent) =>
    parent
      .command('check')
      .description('check the database: storage integrity and entries without a bucket (exit 0 or 1)')
      .option('--db <url>', DB_HELP)
      .addHelpText('after', examples('kvb db check --db /var/lib/kvb/kvb.db', 'kvb db check --db postgres://kvb@db/kvb')),
  async run(options) {
    await withStore(options.db, 'read', async (store) => {
      const problems = await store.maintenance.checkIntegrity();
      const buckets = (await store.buckets.list(undefined, 1_000_000)).length;
      const entries = await store.maintenance.countEntries();
      if (problems.length > 0) throw new DbError(`check failed (${store.flags.backend}): ${problems.join('; ')}`, EXIT_CODES.usage);
      info(`ok (${store.flags.backend}): ${counted(buckets, 'bucket')}, ${counted(entries, 'key')}, no problems found`);
    });
  },
});

const backup = defineCommand({
  define: (parent) =>
    parent
      .command('backup')
      .description('copy a SQLite database consistently to a new file (0600), verified with integrity_check; works while kvb serve runs')
      .option('--db <file>', 'the SQLite database file (env KVB_DB)')
      .requiredOption('--out <file>', 'the copy to write (must not exist)')
      .addHelpText(
        'after',
        `
Copies with SQLite's online backup from a read transaction of its own, so
kvb serve keeps serving (and writing) meanwhile; the copy holds every write
acknowledged before the backup began. A progress line is shown on stderr at
a terminal. For PostgreSQL use pg_dump (see docs/operations.md).
${examples('kvb db backup --db /var/lib/kvb/kvb.db --out /backup/kvb-$(date +%F).db')}`,
      ),
  async run(options) {
    const db = options.db ?? process.env.KVB_DB;
    if (!db) throw new DbError('no database given: pass --db or set KVB_DB', EXIT_CODES.usage);
    const { isPostgresUrl } = await import('../../store/open-store.js');
    if (isPostgresUrl(db))
      throw new DbError('kvb db backup copies SQLite files; for PostgreSQL use pg_dump, or kvb db dump', EXIT_CODES.usage);
    const path = db.replace(/^sqlite:(\/\/)?/, '');
    await backupSqliteFile(path, options.out);
  },
});

const migrate = defineCommand({
  define: (parent) =>
    parent
      .command('migrate')
      .description("bring a database's schema up to this kvb (kvb serve also does it at start); --dry-run lists what would run")
      .option('--db <url>', DB_HELP)
      .option('--dry-run', 'list the pending migrations, one per line, and change nothing')
      .addHelpText(
        'after',
        `
Each migration runs in its own transaction; one that fails leaves nothing
behind. Back up first (kvb db backup, or pg_dump). A database already
upgraded by a newer kvb is refused, naming both versions.
${examples('kvb db migrate --db /var/lib/kvb/kvb.db --dry-run', 'kvb db migrate --db postgres://kvb@db/kvb')}`,
      ),
  async run(options) {
    const url = options.db ?? process.env.KVB_DB;
    if (!url) throw new DbError('no database given: pass --db (a SQLite file or a postgres:// URL) or set KVB_DB', EXIT_CODES.usage);
    const { migrationStatus } = await import('../../store/migration-status.js');
    let pending: string[];
    try {
      if ((await missingSqliteFile(url)) !== undefined) {
        // A new file: every migration is pending, and running them creates it (as kvb serve does).
        const { kvbMigrations } = await import('../../store/kvb-migrations.js');
        pending = kvbMigrations('sqlite').map((step) => step.name);
      } else ({ pending } = await migrationStatus(url));
    } catch (err) {
      if (err instanceof DbError) throw err;
      const message = (err as Error).message;
      if (storageFailureOf(err) === 'KVB_DATABASE_TOO_NEW') throw new DbError(message, STORAGE_FAILURES.KVB_DATABASE_TOO_NEW.exitCode);
      throw new DbError(`cannot read ${url.replace(/\/\/[^@/]*@/, '//…@')}: ${message}`, EXIT_CODES.serverError);
    }
    if (options.dryRun) {
      for (const name of pending) await data(`${name}\n`);
      info(
        pending.length === 0 ? 'up to date: no pending migrations' : `${pending.length} pending migrations (nothing changed: --dry-run)`,
      );
      return;
    }
    if (pending.length === 0) return info('up to date: no pending migrations');
    await withStore(url, 'own', async () => undefined, { create: true });
    info(`applied ${pending.length} migrations: ${pending.join(', ')}`);
  },
});

export const db = defineGroup(
  (parent) =>
    parent
      .command('db')
      .description('operator commands on the database itself: dump, restore, check, backup, migrate (on the server machine)')
      .addHelpText(
        'after',
        examples(
          'kvb db dump --db ./kvb.db -o kvb.dump',
          'kvb db restore --db postgres://kvb@db/kvb kvb.dump',
          'kvb db check --db ./kvb.db',
        ),
      ),
  [dump, restore, check, backup, migrate],
);
