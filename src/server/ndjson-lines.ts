import { badRequest } from '../errors.js';

export interface NdjsonLine {
  /** 1-based. */
  number: number;
  /** The line's bytes, newline excluded. */
  bytes: Buffer;
  /** Whether a newline ended it (false only for a last line cut short). */
  terminated: boolean;
}

/**
 * Splits a byte stream into lines without holding more than one line (and one chunk) at a time.
 * A line longer than `maxLineBytes`, or a stream longer than `maxTotalBytes`, is a 400.
 */
export async function* ndjsonLines(
  source: AsyncIterable<Buffer | string>,
  maxLineBytes: number,
  maxTotalBytes: number,
): AsyncGenerator<NdjsonLine> {
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  let total = 0;
  let number = 0;
  for await (const piece of source) {
    const chunk = typeof piece === 'string' ? Buffer.from(piece) : piece;
    total += chunk.length;
    if (total > maxTotalBytes) throw badRequest(`the import is larger than ${maxTotalBytes} bytes (--max-import-bytes)`);
    let start = 0;
    for (let nl = chunk.indexOf(10, start); nl !== -1; nl = chunk.indexOf(10, start)) {
      const part = chunk.subarray(start, nl);
      const bytes = pending.length === 0 ? part : Buffer.concat([...pending, part]);
      pending = [];
      pendingBytes = 0;
      number++;
      if (bytes.length > maxLineBytes) throw badRequest(`line ${number}: longer than ${maxLineBytes} bytes`);
      yield { number, bytes, terminated: true };
      start = nl + 1;
    }
    if (start < chunk.length) {
      // Copied: the chunk's memory may be reused by the stream once we move on.
      const rest = Buffer.from(chunk.subarray(start));
      pending.push(rest);
      pendingBytes += rest.length;
      if (pendingBytes > maxLineBytes) throw badRequest(`line ${number + 1}: longer than ${maxLineBytes} bytes`);
    }
  }
  if (pendingBytes > 0) yield { number: number + 1, bytes: Buffer.concat(pending), terminated: false };
}
