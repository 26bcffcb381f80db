import { type Command, Option } from 'commander';
import { line } from '../output.js';
import { UsageError, integerOption, withClient } from '../session.js';

/** `5` means `+5`; `-1` and `+2.5` are kept; anything else is a usage error. */
export async function normaliseDelta(delta: string): Promise<string> {
  const { parseDelta } = await import('../../values/numbers.js');
  const signed = delta.startsWith('+') || delta.startsWith('-') ? delta : `+${delta}`;
  if (!parseDelta(signed)) throw new UsageError(`delta must be a number such as 1, +5, -1 or -2.5, not ${JSON.stringify(delta)}`);
  return signed;
}

/** `kvb incr KEY [DELTA]`: the counter; prints the new value. */
export function registerIncr(program: Command): void {
  program
    .command('incr')
    .description('add a signed delta to a numeric key (default +1) and print the new value')
    .argument('<key>', 'the key (created with the delta as its value if missing)')
    .argument('[delta]', 'a number: 5 or +5 adds, -1 subtracts, 0.5 makes it a float', '+1')
    .addOption(new Option('--ttl <seconds>', 'set the expiry (default: keep it; new keys get the bucket default)').argParser(integerOption('--ttl', 0, 2147483647)))
    .addHelpText('after', '\nExamples:\n  kvb incr visits\n  kvb incr stock -1\n  kvb incr score 5 --ttl 3600')
    .action(async (key: string, delta: string, options: { ttl?: number }, command: Command) => {
      await withClient(command, async ({ client, bucket }) => {
        const id = bucket();
        const result = await client.incr(id, key, await normaliseDelta(delta), options.ttl);
        await line(result.data.toString('utf8'));
      });
    });
}
