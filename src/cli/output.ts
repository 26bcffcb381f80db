import type { Readable } from 'node:stream';

/**
 * The only module that prints. Data goes to stdout, exactly; messages go to stderr (and are
 * silenced by --quiet, except failures). Colour only on a TTY, never with NO_COLOR.
 * (The interactive prompts of `kvb init` and `kvb bucket delete` are drawn by @clack/prompts.)
 */

let quiet = false;

export function setQuiet(value: boolean): void {
  quiet = value;
}

export const stdoutIsTty = (): boolean => process.stdout.isTTY === true;
export const stdinIsTty = (): boolean => process.stdin.isTTY === true;

export function colourEnabled(stream: NodeJS.WriteStream): boolean {
  const noColor = process.env.NO_COLOR;
  return stream.isTTY === true && (noColor === undefined || noColor === '');
}

const paint = (stream: NodeJS.WriteStream, code: number, text: string) =>
  colourEnabled(stream) ? `\u001b[${code}m${text}\u001b[0m` : text;

// `kvb ls | head` closes the pipe early: that is success, not a crash. Any other write error
// (a full disk behind a redirect) is a one-line failure like every other.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code === 'EPIPE') process.exit(process.exitCode ?? 0);
  failure(`cannot write to stdout: ${err.message}`);
  process.exit(1);
});

/** Writes data to stdout and resolves once it is handed to the OS (back-pressure respected). */
export function data(chunk: string | Uint8Array): Promise<void> {
  return new Promise((resolve, reject) => {
    process.stdout.write(chunk, (err) => (err ? reject(err) : resolve()));
  });
}

export const line = (text: string): Promise<void> => data(`${text}\n`);

export const json = (value: unknown): Promise<void> => line(JSON.stringify(value));

/** Streams a response body to stdout as it arrives. */
export async function pipe(body: Readable): Promise<void> {
  const { pipeline } = await import('node:stream/promises');
  await pipeline(body, process.stdout, { end: false });
}

/** A message for people, on stderr; --quiet silences it. */
export function info(message: string): void {
  if (!quiet) process.stderr.write(`${message}\n`);
}

export function warn(message: string): void {
  if (!quiet) process.stderr.write(`${paint(process.stderr, 33, 'kvb:')} ${message}\n`);
}

/** A failure: one line on stderr, always (even with --quiet). */
export function failure(message: string): void {
  process.stderr.write(`${paint(process.stderr, 31, 'kvb:')} ${message}\n`);
}

/** Diagnostic text for developers (KVB_DEBUG), on stderr as is. */
export function debug(text: string): void {
  process.stderr.write(`${text}\n`);
}

/** A table for people (cli-table3), written to stdout. */
export async function table(head: string[], rows: string[][]): Promise<void> {
  const { default: Table } = await import('cli-table3');
  const colour = colourEnabled(process.stdout);
  const t = new Table({ head, style: { head: colour ? ['cyan'] : [], border: colour ? ['grey'] : [] } });
  t.push(...rows);
  await line(t.toString());
}

/** Key/value rows, for one object. */
export async function verticalTable(rows: Array<[string, string]>): Promise<void> {
  const { default: Table } = await import('cli-table3');
  const colour = colourEnabled(process.stdout);
  const t = new Table({ style: { head: [], border: colour ? ['grey'] : [] } });
  for (const [name, value] of rows) t.push({ [name]: value });
  await line(t.toString());
}
