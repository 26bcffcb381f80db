import { ERRORS, EXIT_CODES, type ExitOutcome } from '../errors.js';

/*
 * Renders the exit codes of the error table (src/errors.ts) for `kvb --help`, the man page's EXIT
 * STATUS and docs/cli.md's table (`npm run docs` rewrites the two; test/cli/docs-and-structure.test.ts
 * checks they match). The HTTP statuses behind each code come from the ERRORS table, so a new error
 * kind shows up in all three by itself.
 */

/** What each exit code means, in the help's words (`backticks` mark literal text); here, not in errors.ts, which the client package ships. */
const MEANINGS: Record<ExitOutcome, string> = {
  success: 'success',
  usage:
    'usage or configuration error: bad flags or input, a value over the size limit, a server URL that does not answer as kvb, a bucket without a signing key for `kvb mint-token`, a cancelled wizard',
  notFound: 'key or bucket not found, so `kvb get k || echo missing` works',
  refused: 'authentication or permission refused',
  unreachable:
    'server or network unreachable: connection refused, DNS failure, no answer within `--timeout`, or `kvb lock --timeout` gave up waiting for the lock; the message names the URL tried and where it came from',
  serverError: 'server error, or the server refusing for now (storage full, rate limited); try again later',
  conflict:
    'precondition failed or conflict: an `--if-rev`/`--if-absent`/`--if-exists` write, a `kvb txn --check` or a `kvb edit` save found the key in another state; nothing was written',
  tooOld:
    "older than the history the server keeps (`--history-retention`): `kvb watch` cannot resume (list again and watch from there), or `kvb get --rev`, `kvb ls --rev` or `kvb rollback` named a revision below the bucket's history floor",
};

export interface ExitCodeRow {
  code: number;
  meaning: string;
  /** The HTTP statuses that end in this code, in ascending order. */
  statuses: number[];
}

export function exitCodeRows(): ExitCodeRow[] {
  return (Object.entries(EXIT_CODES) as Array<[ExitOutcome, number]>)
    .sort(([, a], [, b]) => a - b)
    .map(([outcome, code]) => ({
      code,
      meaning: MEANINGS[outcome],
      statuses: Object.values(ERRORS)
        .filter((e) => e.exitCode === code)
        .map((e) => e.status)
        .sort((a, b) => a - b),
    }));
}

const withStatuses = (row: ExitCodeRow, meaning: string) =>
  row.statuses.length > 0 ? `${meaning} (HTTP ${row.statuses.join(', ')})` : meaning;

/** The block that ends every client command's --help, wrapped to 80 columns. */
export function exitCodesHelp(): string {
  const lines = exitCodeRows().map((row) => wrap(`  ${row.code}  ${withStatuses(row, row.meaning.replace(/`/g, ''))}`, 80, '     '));
  return `\nExit codes:\n${lines.join('\n')}`;
}

/** The table of docs/cli.md (between the exit-codes markers). */
export function exitCodesMarkdown(): string {
  return [
    '| code | meaning |',
    '|---|---|',
    ...exitCodeRows().map((row) => `| ${row.code} | ${withStatuses(row, row.meaning).replace(/\|/g, '\\|')} |`),
  ].join('\n');
}

/** The man page's EXIT STATUS entries (between the exit-codes markers). */
export function exitCodesRoff(): string {
  const roff = (text: string) =>
    text
      .replace(/\\/g, '\\e')
      .replace(/-/g, '\\-')
      .replace(/`([^`]*)`/g, '\\fB$1\\fR');
  return exitCodeRows()
    .map((row) => `.TP\n.B ${row.code}\n${roff(withStatuses(row, row.meaning.charAt(0).toUpperCase() + row.meaning.slice(1)))}.`)
    .join('\n');
}

function wrap(text: string, width: number, indent: string): string {
  const out: string[] = [];
  let current = '';
  for (const word of text.split(/(?<=\S) (?=\S)/)) {
    if (current !== '' && current.length + 1 + word.length > width) {
      out.push(current);
      current = indent + word;
    } else current = current === '' ? word : `${current} ${word}`;
  }
  out.push(current);
  return out.join('\n');
}
