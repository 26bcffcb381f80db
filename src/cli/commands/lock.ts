import { Argument, Option } from '@commander-js/extra-typings';
import { defineCommand, examples, integer, keyArgument } from '../define-command.js';
import { info, warn } from '../output.js';
import { UsageError, globalFlags, withClient } from '../session.js';
import { MAX_TTL_SECONDS } from '../../limits.js';
import { EXIT_CODES } from '../../errors.js';

/** The lock was lost while the command ran (another holder has it now): exit 6, like a failed condition. */
class LockLostError extends Error {
  readonly exitCode = EXIT_CODES.conflict;
}

/** `--timeout` passed while another holder still had the lock: exit 4, the table's code for a timeout. */
class LockTimeoutError extends Error {
  readonly exitCode = EXIT_CODES.unreachable;
}

/** Shell convention: a command ended by a signal exits 128 + its number. */
const SIGNAL_NUMBERS: Record<string, number> = { SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGKILL: 9, SIGTERM: 15 };

/** `kvb lock NAME -- CMD …`: runs CMD while holding the lock NAME, like `etcdctl lock` and `consul lock`. */
export const lock = defineCommand({
  define: (parent) =>
    parent
      .command('lock')
      .description('run a command while holding a lock (a key), waiting while another holder has it')
      .addArgument(keyArgument('the lock: a key name, e.g. lock/backup'))
      .addArgument(new Argument('<command...>', 'the command and its arguments (after --)'))
      .addOption(
        new Option('--ttl <seconds>', 'how long the lock outlives a holder that stops renewing (killed, cut off)')
          .default(15)
          .argParser(integer('--ttl', 1, MAX_TTL_SECONDS)),
      )
      .addHelpText(
        'after',
        `
The lock is the key NAME, created only if absent (If-None-Match) with the TTL,
renewed every TTL/3 while the command runs, and deleted when it exits. While
another holder has it, kvb waits on the watch feed until the key is deleted or
expires, then tries again. A holder that is killed (kill -9, power loss) holds
the lock at most TTL seconds longer.

With --timeout SECONDS (given as a flag, as consul lock -timeout), kvb gives
up waiting after that long: nothing is run, and it exits 4 naming the lock.
Without it, kvb waits as long as the lock is held (KVB_TIMEOUT bounds each
request only).

kvb exits with the command's exit code (128+N when a signal ends it). SIGINT
and SIGTERM are passed on to the command. If the lock is lost while the
command runs (renewals refused, or the server unreachable for a whole TTL), kvb
sends the command SIGTERM and exits 6. The command sees KVB_LOCK (the name),
KVB_LOCK_OWNER (the lock key's value) and KVB_LOCK_REVISION (the fencing token:
the lock key's create revision, larger for every later holder) in its
environment. A write the command makes with
kvb txn --fence "$KVB_LOCK:$KVB_LOCK_REVISION" commits only while it still holds
the lock: once the lock is lost (a pause past the TTL) and taken by another
holder, it is refused (exit 6) instead of overwriting the new holder's work.
The credential needs
read, write and delete on NAME (a token: kvb mint-token --prefix lock/
--permissions read,write,delete).
${examples(
  'kvb lock lock/backup -- ./backup.sh',
  'kvb lock --timeout 30 lock/deploy -- ./deploy.sh',
  'kvb lock --ttl 60 lock/migrate -- npm run migrate',
  'kvb lock lock/cron -- sh -c "make report && make mail"',
  `kvb lock lock/report -- sh -c 'kvb txn --fence "$KVB_LOCK:$KVB_LOCK_REVISION" --set report=done'`,
)}`,
      ),
  async run(name, argv, options, command) {
    const [file, ...args] = argv;
    if (file === undefined || file === '') throw new UsageError('give the command to run after --');
    const { spawn } = await import('node:child_process');
    const { acquireLock } = await import('../../client/lock.js');
    await withClient(command, async ({ client, bucket }) => {
      const waiting = new AbortController();
      const giveUp = () => waiting.abort(new UsageError('interrupted while waiting for the lock'));
      process.once('SIGINT', giveUp);
      process.once('SIGTERM', giveUp);
      // Only the flag: KVB_TIMEOUT set for every command's requests must not make locks give up.
      const seconds = globalFlags(command).timeout;
      const deadline =
        seconds === undefined
          ? undefined
          : setTimeout(
              () =>
                waiting.abort(
                  new LockTimeoutError(
                    `gave up waiting for lock ${JSON.stringify(name)} after ${seconds} s (--timeout): another holder still has it; nothing was run`,
                  ),
                ),
              seconds * 1000,
            );
      let held;
      try {
        held = await acquireLock(client, bucket(), name, { ttl: options.ttl, signal: waiting.signal });
      } catch (err) {
        if (waiting.signal.reason instanceof LockTimeoutError) throw waiting.signal.reason;
        if (waiting.signal.aborted) process.exit(130);
        throw err;
      } finally {
        clearTimeout(deadline);
        process.off('SIGINT', giveUp);
        process.off('SIGTERM', giveUp);
      }
      info(`holding lock ${JSON.stringify(name)} (revision ${held.revision}, fencing token ${held.token})`);
      const child = spawn(file, args, {
        stdio: 'inherit',
        env: { ...process.env, KVB_LOCK: name, KVB_LOCK_OWNER: held.owner, KVB_LOCK_REVISION: String(held.token) },
      });
      const forward = (signal: NodeJS.Signals) => () => child.kill(signal);
      const onInt = forward('SIGINT');
      const onTerm = forward('SIGTERM');
      process.on('SIGINT', onInt);
      process.on('SIGTERM', onTerm);
      let lost = false;
      held.lost.addEventListener('abort', () => {
        lost = true;
        warn(`${(held.lost.reason as Error).message}; stopping the command`);
        child.kill('SIGTERM');
      });
      const code = await new Promise<number>((resolve, reject) => {
        child.once('error', (err) => reject(new UsageError(`cannot run ${file}: ${(err as NodeJS.ErrnoException).code ?? err.message}`)));
        child.once('exit', (status, signal) => resolve(status ?? 128 + (SIGNAL_NUMBERS[signal ?? ''] ?? 1)));
      }).finally(async () => {
        process.off('SIGINT', onInt);
        process.off('SIGTERM', onTerm);
        await held.release();
      });
      if (lost) throw new LockLostError(`lock ${JSON.stringify(name)} was lost while the command ran`);
      process.exitCode = code;
    });
  },
});
