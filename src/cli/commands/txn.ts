import { Option } from '@commander-js/extra-typings';
import { defineCommand, examples, integer } from '../define-command.js';
import { info, line } from '../output.js';
import { KvbHttpError } from '../../client/client-errors.js';
import { isValidJson } from '../../values/infer-value.js';
import { typeOfText } from '../../values/cli-value.js';
import { UsageError, readStdin, stdinIsPiped, withClient } from '../session.js';
import { MAX_TTL_SECONDS } from '../../limits.js';

const collect = (value: string, previous: string[]) => [...previous, value];

interface TxnOptions {
  fence?: string;
  check: string[];
  set: string[];
  del: string[];
  ttl?: number;
}

/**
 * The request body, as JSON text. A `{"txn":[…]}` document goes through untouched; JSONL is one
 * operation per line, joined as written (so numbers keep their exact text).
 */
export function txnBody(input: string): string {
  const trimmed = input.trim();
  if (trimmed === '') throw new UsageError('the transaction is empty');
  if (isValidJson(trimmed)) {
    const parsed = JSON.parse(trimmed) as unknown;
    if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed) && 'txn' in parsed) return trimmed;
    if (Array.isArray(parsed)) return `{"txn":${trimmed}}`;
  }
  const ops: string[] = [];
  for (const [index, lineText] of input.split('\n').entries()) {
    const op = lineText.trim();
    if (op === '') continue;
    if (!isValidJson(op)) throw new UsageError(`line ${index + 1} is not valid JSON`);
    ops.push(op);
  }
  return `{"txn":[${ops.join(',')}]}`;
}

/** `--check KEY@REV` (live at that revision), `KEY:present` or `KEY:absent`, as a check operation. */
export function checkOperation(spec: string): string {
  const state = /^(.+):(present|absent)$/s.exec(spec);
  if (state) return `{"check":${JSON.stringify(state[1])},"exists":${state[2] === 'present'}}`;
  const at = /^(.+)@(\d{1,15})$/s.exec(spec);
  if (at) return `{"check":${JSON.stringify(at[1])},"rev":${Number(at[2])}}`;
  throw new UsageError(`--check takes KEY@REVISION, KEY:present or KEY:absent, not ${JSON.stringify(spec)}`);
}

/**
 * `--fence LOCK:TOKEN` (what `kvb lock` gives its command as $KVB_LOCK:$KVB_LOCK_REVISION): the
 * lock key is live with that create revision, i.e. the holder that got the token still holds it.
 */
export function fenceOperation(spec: string): string {
  const fence = /^(.+):(\d{1,15})$/s.exec(spec);
  if (!fence) throw new UsageError(`--fence takes LOCK:TOKEN (e.g. "$KVB_LOCK:$KVB_LOCK_REVISION"), not ${JSON.stringify(spec)}`);
  return `{"check":${JSON.stringify(fence[1])},"created":${Number(fence[2])}}`;
}

/** The operation that sets `key` to `value` typed by the one CLI rule (src/values/cli-value.ts), as `kvb set` would. */
export function setOperation(key: string, value: string, ttl: number | undefined): string {
  const type = typeOfText(value);
  const ttlField = ttl !== undefined ? `,"ttl":${ttl}` : '';
  // Text is a JSON string and json its own source (the spec's rule); numbers name their type (an extension).
  if (type === 'text') return `{"set":${JSON.stringify(key)},"value":${JSON.stringify(value)}${ttlField}}`;
  if (type === 'json') return `{"set":${JSON.stringify(key)},"value":${value}${ttlField}}`;
  const written = type === 'int64' ? JSON.stringify(value) : value;
  return `{"set":${JSON.stringify(key)},"value":${written},"type":"${type}"${ttlField}}`;
}

/** The flags that become checks, in the order of their operations: --fence, then each --check. */
const checkFlags = (options: TxnOptions): string[] => [
  ...(options.fence === undefined ? [] : [`--fence ${options.fence}`]),
  ...options.check,
];

/** The operations of --fence, --check, --set and --del. */
export function flagOperations(options: TxnOptions): string[] {
  // Checks first: the server names failed checks by their index, which is then the check flag's position.
  const ops: string[] = [...(options.fence === undefined ? [] : [fenceOperation(options.fence)]), ...options.check.map(checkOperation)];
  for (const assignment of options.set) {
    const eq = assignment.indexOf('=');
    if (eq <= 0) throw new UsageError(`--set takes KEY=VALUE, not ${JSON.stringify(assignment)}`);
    ops.push(setOperation(assignment.slice(0, eq), assignment.slice(eq + 1), options.ttl));
  }
  for (const key of options.del) ops.push(`{"delete":${JSON.stringify(key)}}`);
  return ops;
}

/** `kvb txn [FILE|-]` or `kvb txn --set k=v --del k`: set and delete keys atomically. */
export const txn = defineCommand({
  define: (parent) =>
    parent
      .command('txn')
      .description('set and delete several keys atomically (all or nothing)')
      .argument('[file]', 'a {"txn":[…]} document or JSONL operations; \'-\', or none with stdin piped, reads stdin')
      .option(
        '--fence <lock:token>',
        'commit only while the lock is held with this fencing token (kvb lock: "$KVB_LOCK:$KVB_LOCK_REVISION")',
      )
      .option(
        '--check <key@rev|key:present|key:absent>',
        'commit only if the key is live at that revision, exists, or is absent (repeatable)',
        collect,
        [],
      )
      .option('--set <key=value>', 'set a key (repeatable); the value is typed as kvb set types an argument', collect, [])
      .option('--del <key>', 'delete a key (repeatable)', collect, [])
      .addOption(
        new Option('--ttl <seconds>', 'TTL of every --set (default: the bucket default)').argParser(integer('--ttl', 0, MAX_TTL_SECONDS)),
      )
      .addHelpText(
        'after',
        `
Operations are {"set":"key","value":<json>,"ttl":S}, {"delete":"key"},
{"check":"key","rev":N}, {"check":"key","exists":true|false} and
{"check":"key","created":N} (live with that create revision), and the
reading ones {"get":"key"}, {"expire":"key","ttl":S} (new expiry, same value;
0: never) and {"delete_prefix":"P"}, which see the bucket as it was before the
transaction's writes; with a get or a delete_prefix the server's
{"revision","results":[…]} answer is printed. A JSON string value is stored as
text, any other JSON value as JSON; "type" stores it as int64 (a decimal
string), float64, text, json or bytes (base64), as in an export file. --set
values follow kvb set's rule for an argument: 42 is int64, 1.5 float64,
{"a":1} json, anything else text. When a check (or an expire of a key that is
not live) fails, nothing is written and kvb exits 6 naming it.
--fence LOCK:TOKEN makes the writes fenced: they commit only while the lock
LOCK is still held by the holder that got TOKEN, its fencing token (a holder
paused past its lock's TTL, whose lock another has taken, is refused). Inside
kvb lock, that is --fence "$KVB_LOCK:$KVB_LOCK_REVISION".
${examples(
  'kvb txn --set a=1 --set b=hello --del c',
  'kvb txn --check from@12 --check to@40 --set from=90 --set to=60',
  'kvb txn --check lock:absent --set lock=me --set owner=me',
  `kvb lock lock/report -- sh -c 'kvb txn --fence "$KVB_LOCK:$KVB_LOCK_REVISION" --set report=done'`,
  'kvb txn ops.json',
  `printf '%s\\n' '{"set":"a","value":1}' '{"delete":"b"}' | kvb txn -`,
)}`,
      ),
  async run(file, options, command) {
    const flagOps = flagOperations(options);
    let body: string;
    if (file !== undefined || (flagOps.length === 0 && stdinIsPiped())) {
      if (flagOps.length > 0) throw new UsageError('give operations in a file (or stdin) or as flags, not both');
      let input: string;
      try {
        const { readFile } = await import('node:fs/promises');
        input = file === undefined || file === '-' ? (await readStdin()).toString('utf8') : await readFile(file, 'utf8');
      } catch (err) {
        throw new UsageError(`cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
      }
      body = txnBody(input);
    } else {
      if (flagOps.length === 0) throw new UsageError('no operations: give FILE, pipe them on stdin, or use --set/--del');
      if (options.fence !== undefined && options.set.length === 0 && options.del.length === 0)
        throw new UsageError('--fence guards writes: give --set or --del');
      body = `{"txn":[${flagOps.join(',')}]}`;
    }
    await withClient(command, async ({ client, bucket }) => {
      let outcome;
      try {
        outcome = await client.txn(bucket(), body);
      } catch (err) {
        throw flagOps.length > 0 ? nameFailedChecks(err, checkFlags(options)) : err;
      }
      // Gets and prefix deletes report back: the server's {"revision","results":[…]}, as sent.
      if (outcome.ok && outcome.results !== undefined) await line(outcome.results);
      info('committed');
    });
  },
});

/** A 409 from --check flags names the flags (`a@12`) instead of operation indices (`txn[0]`). */
function nameFailedChecks(err: unknown, checks: string[]): unknown {
  if (!(err instanceof KvbHttpError) || err.kind !== 'conflict' || !err.detail) return err;
  const failed = [...err.detail.matchAll(/txn\[(\d+)\]/g)].map((m) => checks[Number(m[1])]).filter((c) => c !== undefined);
  if (failed.length === 0) return err;
  return new KvbHttpError(err.status, err.kind, err.subject, `checks failed: ${failed.join(', ')}`);
}
