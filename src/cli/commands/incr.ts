import type { Command } from 'commander';
import { parseDelta } from '../../values/numbers.js';
import { line } from '../output.js';
import { UsageError, withClient } from '../session.js';

/** `5` means `+5`; `-1` and `+2.5` are kept; anything else is a usage error. */
export function normaliseDelta(delta: string): string {
  const signed = delta.startsWith('+') || delta.startsWith('-') ? delta : `+${delta}`;
  if (!parseDelta(signed)) throw new UsageError(`delta must be a number such as 1, +5, -1 or -2.5, not ${JSON.stringify(delta)}`);
  return signed;
}

/** `kvb incr KEY [DELTA]`: the counter; prints the new value. */
export async function incr(key: string, delta: string, options: { ttl?: number }, command: Command): Promise<void> {
  const signed = normaliseDelta(delta);
  await withClient(command, async ({ client, bucket }) => {
    const result = await client.incr(bucket(), key, signed, options.ttl);
    await line(result.data.toString('utf8'));
  });
}
