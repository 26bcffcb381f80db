import type { Command } from 'commander';
import { withClient } from '../session.js';

/** `kvb del KEY`. */
export function registerDel(program: Command): void {
  program
    .command('del')
    .description('delete a key (exit 2 if it does not exist)')
    .argument('<key>', 'the key')
    .addHelpText('after', '\nExamples:\n  kvb del greeting\n  kvb del session/42 || true')
    .action(async (key: string, _options: unknown, command: Command) => {
      await withClient(command, async ({ client, bucket }) => {
        await client.del(bucket(), key);
      });
    });
}
