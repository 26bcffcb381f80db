import { Option } from '@commander-js/extra-typings';
import { defineCommand, examples, integer } from '../define-command.js';
import { counted, info, json, stdinIsTty, stdoutIsTty, table } from '../output.js';
import { UsageError, withClient } from '../session.js';
import type { RollbackResult } from '../../client/kvb-http.js';

async function show(result: RollbackResult, asJson: boolean, revision: number): Promise<void> {
  if (asJson || !stdoutIsTty()) return json(result);
  if (result.changes.length === 0) {
    info(`nothing to change: already as at revision ${revision}`);
    return;
  }
  await table(
    ['key', 'action', 'now', 'becomes'],
    result.changes.map((c) => [
      c.key,
      c.action,
      c.from ? `${c.from.type}, ${c.from.size} B (rev ${c.from.rev})` : 'absent',
      c.to ? `${c.to.type}, ${c.to.size} B` : 'absent',
    ]),
  );
}

/** `kvb rollback --to N [--prefix P]`: the bucket (or prefix) as it was at revision N, as one new revision. */
export const rollbackCommand = defineCommand({
  define: (parent) =>
    parent
      .command('rollback')
      .description('make the bucket (or a prefix) what it was at a past revision, as one new revision (asks first unless --yes)')
      .addOption(
        new Option('--to <n>', 'the revision to go back to').argParser(integer('--to', 0, Number.MAX_SAFE_INTEGER)).makeOptionMandatory(),
      )
      .option('--prefix <prefix>', 'roll back only the keys under this prefix (others are left alone)')
      .option('--dry-run', 'print what would change and change nothing')
      .option('-y, --yes', 'do not ask for confirmation')
      .option('--json', "print the server's answer as JSON (the default when piped)")
      .addHelpText(
        'after',
        `
All or nothing, counted against quotas; watchers see the sets and deletes it
makes. The rollback is itself history, so it can be rolled back in turn.
Needs the secret key, or write and delete on the prefix (a token: --prefix
inside its own). A revision below the bucket's history floor exits 7.
${examples('kvb rollback --to 1200 --dry-run', 'kvb rollback --to 1200 --prefix config/', 'kvb rollback --to 1200 --yes --json')}`,
      ),
  async run(options, command) {
    await withClient(command, async ({ client, bucket }) => {
      const id = bucket();
      const scope = { prefix: options.prefix };
      if (options.dryRun) {
        await show(await client.rollback(id, options.to, { ...scope, dryRun: true }), options.json === true, options.to);
        return;
      }
      if (!options.yes) {
        if (!stdinIsTty())
          throw new UsageError('refusing to roll back without confirmation: pass --yes (or --dry-run to see what would change)');
        const plan = await client.rollback(id, options.to, { ...scope, dryRun: true });
        await show(plan, false, options.to);
        const prompts = await import('@clack/prompts');
        const what = options.prefix ? `the keys under ${JSON.stringify(options.prefix)}` : `bucket ${id}`;
        const answer = await prompts.confirm({
          message: `Roll ${what} back to revision ${options.to} (changes ${counted(plan.changed, 'key')})?`,
          initialValue: false,
          output: process.stderr,
        });
        if (prompts.isCancel(answer) || !answer) throw new UsageError('not rolled back');
      }
      const result = await client.rollback(id, options.to, scope);
      if (options.json || !stdoutIsTty()) await json(result);
      else
        info(
          result.changed === 0
            ? `nothing to change: already as at revision ${options.to}`
            : `rolled back ${result.changed} key${result.changed === 1 ? '' : 's'}: revision ${result.revision}`,
        );
    });
  },
});
