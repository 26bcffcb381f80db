import { readFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { info } from '../output.js';
import { isValidJson } from '../../values/infer-value.js';
import { UsageError, readStdin, stdinIsPiped, withClient } from '../session.js';

interface TxnOptions {
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

/** `--set k=v`: v is JSON when it is valid JSON other than null (5, true, {"a":1}), otherwise text. */
export function flagOperations(options: TxnOptions): string[] {
  const ops: string[] = [];
  for (const assignment of options.set) {
    const eq = assignment.indexOf('=');
    if (eq <= 0) throw new UsageError(`--set takes KEY=VALUE, not ${JSON.stringify(assignment)}`);
    const key = assignment.slice(0, eq);
    const value = assignment.slice(eq + 1);
    const json = value !== 'null' && value.trim() === value && value !== '' && isValidJson(value) ? value : JSON.stringify(value);
    ops.push(`{"set":${JSON.stringify(key)},"value":${json}${options.ttl !== undefined ? `,"ttl":${options.ttl}` : ''}}`);
  }
  for (const key of options.del) ops.push(`{"delete":${JSON.stringify(key)}}`);
  return ops;
}

/** `kvb txn [FILE|-]` or `kvb txn --set k=v --del k`: set and delete keys atomically. */
export async function txn(file: string | undefined, options: TxnOptions, command: Command): Promise<void> {
  const flagOps = flagOperations(options);
  let body: string;
  if (file !== undefined || (flagOps.length === 0 && stdinIsPiped())) {
    if (flagOps.length > 0) throw new UsageError('give operations in a file (or stdin) or as flags, not both');
    let input: string;
    try {
      input = file === undefined || file === '-' ? (await readStdin()).toString('utf8') : await readFile(file, 'utf8');
    } catch (err) {
      throw new UsageError(`cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
    body = txnBody(input);
  } else {
    if (flagOps.length === 0) throw new UsageError('no operations: give FILE, pipe them on stdin, or use --set/--del');
    body = `{"txn":[${flagOps.join(',')}]}`;
  }
  await withClient(command, async ({ client, bucket }) => {
    await client.txn(bucket(), body);
    info('committed');
  });
}
