import { Option } from '@commander-js/extra-typings';
import { parseDelta } from '../../values/numbers.js';
import { defineCommand, examples, integer, keyArgument, withConditionOptions, writeCondition } from '../define-command.js';
import { line } from '../output.js';
import { UsageError, withClient } from '../session.js';
import { MAX_TTL_SECONDS } from '../../limits.js';

/** `5` means `+5`; `-1` and `+2.5` are kept; anything else is a usage error. */
export function normaliseDelta(delta: string): string {
  const signed = delta.startsWith('+') || delta.startsWith('-') ? delta : `+${delta}`;
  if (!parseDelta(signed)) throw new UsageError(`delta must be a number such as 1, +5, -1 or -2.5, not ${JSON.stringify(delta)}`);
  return signed;
}

/** `kvb incr KEY [DELTA]`: the counter; prints the new value. */
export const incr = defineCommand({
  define: (parent) =>
    withConditionOptions(
      parent
        .command('incr')
        .description('add a signed delta to a numeric key (default +1) and print the new value')
        .addArgument(keyArgument('the key (created with the delta as its value if missing)'))
        .argument('[delta]', 'a number: 5 or +5 adds, -1 subtracts, 0.5 makes it a float', '+1')
        .addOption(
          new Option('--ttl <seconds>', 'set the expiry (default: keep it; new keys get the bucket default)').argParser(
            integer('--ttl', 0, MAX_TTL_SECONDS),
          ),
        ),
    ).addHelpText(
      'after',
      examples('kvb incr visits', 'kvb incr stock -1', 'kvb incr score 5 --ttl 3600', 'kvb incr stock -1 --if-exists'),
    ),
  async run(key, delta, options, command) {
    const signed = normaliseDelta(delta);
    await withClient(command, async ({ client, bucket }) => {
      const result = await client.incr(bucket(), key, signed, options.ttl, writeCondition(options));
      await line(new TextDecoder().decode(result.data));
    });
  },
});
