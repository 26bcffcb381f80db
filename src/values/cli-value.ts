import { isUtf8 } from 'node:buffer';
import { isValidJson } from './infer-value.js';
import { parseNumber } from './numbers.js';

/*
 * The one typing rule for a value given to the CLI: as an argument (`kvb set k v`), on stdin or
 * with --file, and in `kvb txn --set k=v`. Pure; documented in `kvb set --help`, man/kvb.1 and
 * docs/cli.md ("How kvb types a value").
 *
 *   1. Stdin and --file only: bytes that are not UTF-8, or hold a NUL byte, are bytes, exactly.
 *      Otherwise the one trailing newline (`\n` or `\r\n`) that echo or an editor adds is dropped,
 *      as `kvb edit` does, and the text is typed by 2–4.
 *   2. A number in the server's grammar is int64 (an integer within int64) or float64 (with a
 *      fraction or exponent); an integer beyond int64 is json, as the server types it for curl.
 *   3. A JSON object or array is json.
 *   4. Anything else is text, including `true`, `null` and `"quoted"`: a shell word is text.
 *
 * --type overrides the type; --raw sends stdin or the file's bytes untouched (no newline dropped)
 * and lets the server type them as it does for curl.
 */

export type CliValueType = 'json' | 'text' | 'int64' | 'float64' | 'bytes';

const INTEGER = /^-?(?:0|[1-9][0-9]*)$/;

/** Rules 2–4: the type of text typed on a command line (or read as text from stdin). */
export function typeOfText(text: string): Exclude<CliValueType, 'bytes'> {
  const number = parseNumber(text);
  if (number) return number.kind;
  if (INTEGER.test(text)) return 'json';
  if (/^\s*[[{]/.test(text) && isValidJson(text)) return 'json';
  return 'text';
}

/** Rule 1: stdin's or a file's bytes as the value kvb stores, and its type. */
export function typeOfStream(data: Buffer): { type: CliValueType; data: Buffer } {
  if (!isUtf8(data) || data.includes(0)) return { type: 'bytes', data };
  const end = data.at(-1) === 10 ? (data.at(-2) === 13 ? 2 : 1) : 0;
  const text = data.subarray(0, data.length - end);
  return { type: typeOfText(text.toString('utf8')), data: text };
}
