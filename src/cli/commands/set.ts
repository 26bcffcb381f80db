import { readFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { CONTENT_TYPES } from '../../values/value-type.js';
import { UsageError, readStdin, stdinIsPiped, withClient } from '../session.js';

type SetType = 'json' | 'text' | 'int' | 'float' | 'bytes';

/** --type json, text and bytes travel as the Content-Type the server reads them back with. */
const SENT_AS: Partial<Record<SetType, string>> = { json: CONTENT_TYPES.json, text: CONTENT_TYPES.text, bytes: CONTENT_TYPES.bytes };

interface SetOptions {
  ttl?: number;
  type?: SetType;
  file?: string;
}

/** The value's bytes: from the argument, --file, or stdin (`-`, or no VALUE with stdin piped). */
async function valueBytes(value: string | undefined, options: SetOptions): Promise<Buffer> {
  if (options.file !== undefined) {
    if (value !== undefined) throw new UsageError('give the value as an argument or with --file, not both');
    try {
      return await readFile(options.file);
    } catch (err) {
      throw new UsageError(`cannot read ${options.file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
  }
  if (value === '-' || (value === undefined && stdinIsPiped())) return readStdin();
  if (value === undefined) throw new UsageError('no value: give VALUE, --file F, or pipe it on stdin');
  return Buffer.from(value, 'utf8');
}

/** The body and Content-Type that make the server store `type`; numbers are checked and sent in its grammar. */
export async function typedBody(data: Buffer, type: SetType | undefined): Promise<{ body: Buffer; contentType?: string }> {
  if (type === undefined) return { body: data };
  if (type === 'int' || type === 'float') {
    const { parseNumber, formatFloat, toFloat } = await import('../../values/numbers.js');
    const text = data.toString('utf8').trim();
    const number = parseNumber(text);
    if (type === 'int') {
      if (number?.kind !== 'int64') throw new UsageError(`${JSON.stringify(text)} is not a 64-bit integer`);
      return { body: Buffer.from(number.value.toString()) };
    }
    // A float may be written as an integer (3 -> 3.0), even one beyond Int64 (then `N.0` parses as a float).
    const asFloat = number ?? (/^-?\d+$/.test(text) ? parseNumber(`${text}.0`) : undefined);
    if (asFloat === undefined) throw new UsageError(`${JSON.stringify(text)} is not a finite number`);
    return { body: Buffer.from(formatFloat(toFloat(asFloat))) };
  }
  return { body: data, contentType: SENT_AS[type] };
}

/** `kvb set KEY [VALUE]`. */
export async function set(key: string, value: string | undefined, options: SetOptions, command: Command): Promise<void> {
  await withClient(command, async ({ client, bucket }) => {
    const id = bucket();
    const { body, contentType } = await typedBody(await valueBytes(value, options), options.type);
    await client.set(id, key, body, { contentType, ttl: options.ttl });
  });
}
