import { defineCommand, examples, keyArgument, withConditionOptions, writeCondition } from '../define-command.js';
import { withClient } from '../session.js';

/** `kvb del KEY`: exit 2 when the key does not exist. */
export const del = defineCommand({
  define: (parent) =>
    withConditionOptions(parent.command('del').description('delete a key (exit 2 if it does not exist)').addArgument(keyArgument('the key'))).addHelpText(
      'after',
      examples('kvb del greeting', 'kvb del session/42 || true', 'kvb del lock/leader --if-rev 7   # release only the lock you took'),
    ),
  async run(key, options, command) {
    await withClient(command, async ({ client, bucket }) => {
      await client.del(bucket(), key, writeCondition(options));
    });
  },
});
