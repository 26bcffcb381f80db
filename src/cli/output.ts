import type { Readable } from 'node:stream';
import { renderColumns } from './values-table.js';

/**
 * The only module that prints. Data goes to stdout, exactly; messages go to stderr (and are
 * silenced by --quiet, except failures). Colour only on a TTY, never with NO_COLOR.
 * (The interactive prompts of `kvb init` and `kvb bucket delete` are drawn by @clack/prompts.)
 * Tables are plain columns in one style (values-table.ts), whatever the command.
 */

let quiet = false;

export function setQuiet(value: boolean): void {
  quiet = value;
}

export const stdoutIsTty = (): boolean => process.stdout.isTTY === true;
export const stdinIsTty = (): boolean => process.stdin.isTTY === true;
export const stderrIsTty = (): boolean => process.stderr.isTTY === true;

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

/** A table for people: plain columns under a heading line (values-table.ts draws it), written to stdout. */
export async function table(head: string[], rows: string[][]): Promise<void> {
  await data(renderColumns(head, rows));
}

/** Name/value rows, for one object: two plain columns, no heading. */
export async function verticalTable(rows: Array<[string, string]>): Promise<void> {
  await data(renderColumns([], rows));
}

export interface Progress {
  /** Counts so far; redrawn at most a few times a second. */
  update(items: number, bytes: number): void;
  /** Clears the line. */
  done(): void;
}

const human = (bytes: number) =>
  bytes >= 1 << 30
    ? `${(bytes / (1 << 30)).toFixed(1)} GiB`
    : bytes >= 1 << 20
      ? `${(bytes / (1 << 20)).toFixed(1)} MiB`
      : `${(bytes / 1024).toFixed(0)} KiB`;

/**
 * A one-line progress display on stderr (keys, bytes, rate), only when stderr is a terminal and
 * not --quiet; stdout keeps nothing but data. `unit` names what is counted ("keys").
 */
/**
 * Passes a stream's chunks through, telling `shown` how many lines (less `skipLines`, e.g. a
 * header line) and bytes have gone by: export and import count NDJSON keys this way.
 */
export async function* countingLines(source: AsyncIterable<unknown>, shown: Progress, skipLines = 0): AsyncGenerator<Buffer> {
  let lines = 0;
  let bytes = 0;
  for await (const chunk of source) {
    const buffer = chunk as Buffer;
    bytes += buffer.length;
    for (let i = buffer.indexOf(10); i !== -1; i = buffer.indexOf(10, i + 1)) lines++;
    shown.update(Math.max(lines - skipLines, 0), bytes);
    yield buffer;
  }
}

export function progress(verb: string, unit = 'keys'): Progress {
  if (quiet || process.stderr.isTTY !== true) return { update: () => {}, done: () => {} };
  const started = Date.now();
  let drawn = 0;
  let shown = false;
  return {
    update(items, bytes) {
      const now = Date.now();
      if (now - drawn < 200) return;
      drawn = now;
      shown = true;
      const seconds = Math.max((now - started) / 1000, 0.001);
      process.stderr.write(
        `\r\u001b[2K${verb} ${items.toLocaleString('en')} ${unit}, ${human(bytes)} (${Math.round(items / seconds).toLocaleString('en')} ${unit}/s)`,
      );
    },
    done() {
      if (shown) process.stderr.write('\r\u001b[2K');
    },
  };
}

/** `1 key`, `2 keys`: a count with its noun in the number the count needs. */
export function counted(n: number, noun: string): string {
  return `${n} ${n === 1 ? noun : `${noun}s`}`;
}
