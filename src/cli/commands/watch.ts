import { Option } from '@commander-js/extra-typings';
import { ResumePoint } from '../../client/watch-feed.js';
import { defineCommand, examples, integer } from '../define-command.js';
import { data, stderrIsTty, stdoutIsTty, warn } from '../output.js';
import { withClient } from '../session.js';
import { eventValueCell, expiresCell, valueSource } from '../values-table.js';
import { type ExecEvent, runHandler } from '../watch-exec.js';
import { EXIT_CODES } from '../../errors.js';

/** `since` is older than the server's retained changes: the caller must re-list (exit code 7). */
export class WatchResetError extends Error {
  readonly exitCode = EXIT_CODES.tooOld;
}

/** The credential stopped being valid, or the bucket was deleted, while watching (exit code 3). */
class WatchClosedError extends Error {
  readonly exitCode = EXIT_CODES.refused;
}

interface WatchEvent extends ExecEvent {
  reason?: string;
  oldest?: number;
}

/** One event for a person: the value rendered as ls renders it (bytes as <N bytes>, int64 a number, JSON as stored), expiry relative. */
function readable(e: WatchEvent, text: string, withValues: boolean): string {
  const value = withValues && e.type === 'set' && e.value_type ? ` = ${eventValueCell(e.value_type, e.value, valueSource(text))}` : '';
  const expiry = e.type === 'set' && e.expires_at ? `  (expires ${expiresCell(e.expires_at, Date.now())})` : '';
  return `${String(e.rev).padStart(6)}  ${e.type.padEnd(6)}  ${e.key}${value}${expiry}`;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** `kvb watch [PREFIX]`: the live change feed, resumed after a dropped connection without gaps or repeats. */
export const watch = defineCommand({
  define: (parent) =>
    parent
      .command('watch')
      .description('print changes under a prefix as they happen (resumes after a dropped connection)')
      .argument('[prefix]', 'only keys starting with this')
      .addOption(
        new Option('--since <rev>', 'start after this revision (every retained change since), not from now').argParser(
          integer('--since', 0, Number.MAX_SAFE_INTEGER),
        ),
      )
      .option('--values', 'include the values')
      .option(
        '--exec <command>',
        'run COMMAND (with sh -c) once per change, in order: the event as JSON on its stdin and in KVB_OP, KVB_KEY, KVB_REVISION, …',
      )
      .addOption(
        new Option('--format <format>', 'text (default on a terminal) or jsonl (default when piped)').choices(['text', 'jsonl'] as const),
      )
      .addHelpText(
        'after',
        `
Runs until Ctrl-C (exit 0). A server that cannot be reached at the start is an
error (exit 4), as for every command. Once connected, after a dropped connection
it reconnects with backoff and resumes after the last revision it printed
(named on stderr), so nothing is missed or printed twice. A server that shuts
down ends the feed with a closed event: kvb watch says so on stderr and
reconnects the same way (behind a load balancer, another instance answers).
When the server no longer holds
the changes after that revision (--since too old, or down for longer than its
--watch-retention), it says so on stderr and exits 7: list again (kvb ls) and
watch from the revision the listing was taken at.

With --exec, nothing is printed; COMMAND runs once per change (each after the
previous one exits), with the event (one JSON line, as --format jsonl prints it)
on stdin and in its environment: KVB_OP (set, delete or expire), KVB_KEY,
KVB_REVISION, KVB_EVENT (the JSON line), and for a set KVB_EXPIRES_AT (empty when
it never expires) and KVB_VALUE_TYPE, and with --values KVB_VALUE (text as is,
other types as JSON). A key or value containing U+0000 cannot be put in the
environment: that variable is left out, named in KVB_OMITTED (and on stderr);
read the event from stdin or KVB_EVENT instead. A command that fails is
reported on stderr; the watch goes on.
${examples(
  'kvb watch config/',
  'kvb watch --values --format jsonl | jq -c .',
  'kvb watch --since 1200 user/',
  "kvb watch config/ --exec 'systemctl reload app'",
  'kvb watch jobs/ --values --exec \'echo "$KVB_OP $KVB_KEY = $KVB_VALUE"\'',
)}`,
      ),
  async run(prefix, options, command) {
    process.once('SIGINT', () => process.exit(0));
    await withClient(command, async ({ client, bucket }) => {
      const w: WatchState = {
        format: options.format ?? (stdoutIsTty() ? 'text' : 'jsonl'),
        values: options.values === true,
        since: options.since,
        exec: options.exec,
        resume: new ResumePoint(options.since),
        failures: 0,
        connected: false,
        printed: undefined,
        shutdown: false,
      };
      const id = bucket();
      for (;;) {
        let body;
        try {
          body = await client.watch(id, { prefix, since: w.resume.since, values: options.values });
        } catch (err) {
          await afterFailedConnect(w, err);
          continue;
        }
        w.failures = 0;
        w.connected = true;
        const closing = await followFeed(w, body);
        w.resume.cut();
        if (closing === undefined) warn(resuming(w));
        else if (!w.shutdown) warn(`the server ended the watch: ${closing}; ${resumingAfter(w)}`);
        w.shutdown ||= closing !== undefined;
        await sleep(250 + Math.random() * 250);
      }
    });
  },
});

/** One `kvb watch` across its connections. */
interface WatchState {
  format: 'text' | 'jsonl';
  values: boolean;
  since: number | undefined;
  exec: string | undefined;
  resume: ResumePoint;
  /** Failed connection attempts in a row. */
  failures: number;
  connected: boolean;
  /** The revision of the last change printed: what "resuming after" names. */
  printed: number | undefined;
  /**
   * Set when the server ended the feed with `closed` because it is shutting down, until a line
   * flows again: reconnecting then (to the same URL: behind a balancer, another instance may
   * answer) is expected, said once, and its failed attempts are no "connection lost".
   */
  shutdown: boolean;
}

const resumingAfter = (w: WatchState) =>
  w.printed !== undefined
    ? `reconnecting and resuming after revision ${w.printed}, the last change printed`
    : `reconnecting and resuming after revision ${w.resume.since ?? 'now'}`;
const resuming = (w: WatchState) => `connection lost; ${resumingAfter(w)}`;

/** A connection attempt that failed: final before the first connection or on an answer, else waited out with backoff. */
async function afterFailedConnect(w: WatchState, err: unknown): Promise<void> {
  // Until it has connected once, kvb watch fails like every other command (exit 4 for an
  // unreachable server): a wrong URL or a server that is down must not retry forever.
  if (!w.connected) throw err;
  // Afterwards an answer (4xx/5xx other than 503) is final; an unreachable server is retried.
  const status = (err as { status?: number }).status;
  if (status !== undefined && status !== 503) throw err;
  w.failures++;
  if (w.failures === 1 && !w.shutdown) warn(resuming(w));
  const delay = Math.min(10_000, 250 * 2 ** Math.min(w.failures, 6)) * (0.5 + Math.random() / 2);
  // At a terminal a person is waiting: one line per failed try, so the silence is not a hang.
  if (stderrIsTty())
    warn(`still reconnecting (attempt ${w.failures}: ${(err as Error).message}); next try in ${(delay / 1000).toFixed(1)} s`);
  await sleep(delay);
}

/**
 * Prints (or runs --exec for) each line of one connection's feed until it ends: the shutdown
 * reason when the server closed it for that, undefined when the connection dropped.
 */
async function followFeed(w: WatchState, body: AsyncIterable<unknown>): Promise<string | undefined> {
  let buffer = '';
  try {
    for await (const chunk of body) {
      buffer += (chunk as Buffer).toString('utf8');
      let at: number;
      while ((at = buffer.indexOf('\n')) !== -1) {
        const text = buffer.slice(0, at);
        buffer = buffer.slice(at + 1);
        const closing = await onLine(w, text);
        if (closing !== undefined) return closing;
      }
    }
  } catch (err) {
    if (err instanceof WatchResetError || err instanceof WatchClosedError) throw err;
    // A dropped connection: the caller reconnects.
  }
  return undefined;
}

/** One line of the feed; the reason when it is the server's `closed` for a shutdown. */
async function onLine(w: WatchState, text: string): Promise<string | undefined> {
  const e = JSON.parse(text) as WatchEvent;
  if (e.type === 'reset') {
    throw new WatchResetError(
      `the server no longer holds the changes after revision ${w.resume.since ?? 0} (it keeps them from revision ${e.oldest ?? '?'}; ${e.rev} is current)${e.oldest === undefined ? ': this client fell behind' : ''}; list the keys again (kvb ls) and run kvb watch --since <the revision of that listing>`,
    );
  }
  if (e.type === 'closed') {
    if (/shutting down/.test(e.reason ?? '')) return e.reason;
    throw new WatchClosedError(`the server ended the watch: ${e.reason}`);
  }
  w.shutdown = false;
  if (e.type === 'sync' || e.type === 'progress') {
    w.resume.reached(e.rev!);
    if (w.format === 'jsonl' && e.type === 'sync' && w.since === undefined && w.exec === undefined) await data(`${text}\n`);
    return undefined;
  }
  if (!w.resume.fresh(e.rev!, e.key!)) return undefined;
  if (w.exec !== undefined) await runHandler(w.exec, e, text);
  else await data(w.format === 'jsonl' ? `${text}\n` : `${readable(e, text, w.values)}\n`);
  w.printed = e.rev;
  return undefined;
}
