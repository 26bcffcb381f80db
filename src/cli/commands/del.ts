import { Option } from '@commander-js/extra-typings';
import { defineCommand, examples, withConditionOptions, writeCondition } from '../define-command.js';
import { info, stdinIsTty } from '../output.js';
import { UsageError, withClient } from '../session.js';

/** `kvb del KEY`: exit 2 when the key does not exist; `kvb del --prefix P`: every key under P, as one revision. */
export const del = defineCommand({
  define: (parent) =>
    withConditionOptions(
      parent
        .command('del')
        .description('delete a key (exit 2 if it does not exist), or with --prefix every key under a prefix as one revision')
        .argument('[key]', 'the key'),
    )
      .addOption(
        new Option(
          '--prefix <prefix>',
          'delete every key starting with PREFIX, in one revision (counts and asks first at a terminal)',
        ).conflicts(['ifRev', 'ifAbsent', 'ifExists']),
      )
      .option('-y, --yes', 'with --prefix: do not ask for confirmation (needed when stdin is not a terminal)')
      .addHelpText(
        'after',
        `
--prefix deletes every live key under the (non-empty) prefix in one transaction:
one bucket revision, one watch event per key, all or nothing; at most 50,000 keys
(delete a larger prefix in parts). At a terminal it counts the keys and asks
first; in scripts pass --yes. It prints how many keys it deleted (stderr).
${examples(
  'kvb del greeting',
  'kvb del session/42 || true',
  'kvb del lock/leader --if-rev 7   # release only the lock you took',
  'kvb del --prefix tmp/',
  'kvb del --prefix cache/2024- --yes',
)}`,
      ),
  async run(key, options, command) {
    if (options.prefix === undefined) {
      if (key === undefined || key === '') throw new UsageError(key === '' ? 'a key must not be empty' : 'give a KEY, or --prefix PREFIX');
      await withClient(command, async ({ client, bucket }) => {
        await client.del(bucket(), key, writeCondition(options));
      });
      return;
    }
    const prefix = options.prefix;
    if (key !== undefined) throw new UsageError('give a KEY or --prefix PREFIX, not both');
    if (prefix === '') throw new UsageError('--prefix must not be empty (kvb bucket delete removes everything)');
    await withClient(command, async ({ client, bucket }) => {
      const id = bucket();
      if (!options.yes) {
        if (!stdinIsTty()) throw new UsageError('refusing to delete by prefix without confirmation: pass --yes');
        const count = await countUnder(client, id, prefix);
        if (count === 0) {
          info(`no keys under ${JSON.stringify(prefix)}`);
          return;
        }
        const prompts = await import('@clack/prompts');
        const answer = await prompts.confirm({
          message: `Delete ${count} key${count === 1 ? '' : 's'} under ${JSON.stringify(prefix)}?`,
          initialValue: false,
          output: process.stderr,
        });
        if (prompts.isCancel(answer) || !answer) throw new UsageError('not deleted');
      }
      const { deletePrefix } = await import('../../client/bucket-primitives.js');
      const { deleted, revision } = await deletePrefix(client, id, prefix);
      info(
        `deleted ${deleted} key${deleted === 1 ? '' : 's'} under ${JSON.stringify(prefix)}${deleted > 0 ? ` (revision ${revision})` : ''}`,
      );
    });
  },
});

/** How many live keys are under `prefix` now (following cursors), for the confirmation question. */
async function countUnder(client: import('../../client/kvb-http.js').KvbHttp, bucket: string, prefix: string): Promise<number> {
  const { linesOf } = await import('../../client/typed-values.js');
  let count = 0;
  let cursor: string | undefined;
  do {
    const page = await client.listPage(bucket, { prefix, format: 'jsonl', limit: 10_000, cursor });
    for await (const _line of linesOf(page.body)) count++;
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  return count;
}
