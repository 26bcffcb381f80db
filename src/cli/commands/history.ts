import { Argument, Option } from '@commander-js/extra-typings';
import { UsageError } from '../usage-error.js';
import { defineCommand, examples, integer } from '../define-command.js';
import { data, stdoutIsTty, table } from '../output.js';
import { eventValueCell, expiresCell, int64AsString, truncate, valueSource } from '../values-table.js';
import { withClient } from '../session.js';
import type { HistoryLine } from '../../client/http-types.js';

/** A history line's actor in one cell: kind (token:ID for a token with an id), @address; '-' before kvb recorded actors. */
function actorText(actor: HistoryLine['actor'] | undefined): string {
  if (!actor) return '-';
  const who = actor.kind === 'token' && actor.token_id ? `token:${actor.token_id}` : actor.kind;
  return actor.address ? `${who}@${actor.address}` : who;
}

/** Changes asked for per request while following cursors. */
const PAGE = 500;

/**
 * `kvb history KEY`: a key's recorded changes, newest first; `kvb history` without a key: the
 * bucket's change log in revision order ("what did this token change?"). A table at a terminal,
 * the server's JSONL for pipes.
 */
export const history = defineCommand({
  define: (parent) =>
    parent
      .command('history')
      .description(
        "a key's recorded changes, newest first; without a key, the bucket's changes in revision order: revision, (key,) operation, time, type, size, actor (and value)",
      )
      .addArgument(
        new Argument('[key]', "the key (none: the bucket's change log, which needs the secret key)").argParser((value: string) => {
          if (value === '') throw new UsageError('a key must not be empty');
          return value;
        }),
      )
      .option('--values', "include each change's value")
      .addOption(new Option('--limit <n>', 'at most this many changes').argParser(integer('--limit', 1, Number.MAX_SAFE_INTEGER)))
      .addOption(
        new Option('--format <format>', 'table (default on a terminal) or jsonl (default when piped)').choices(['table', 'jsonl'] as const),
      )
      .option(
        '--actor <actor>',
        "only this actor's changes: secret, write, read, anonymous, token, server, or token:ID (needs the secret key)",
      )
      .option('--prefix <prefix>', 'without a key: only changes to keys under this prefix')
      .option('--since <rev|time>', 'without a key: changes after this revision, or at or after this RFC 3339 time')
      .option('--until <rev|time>', 'without a key: changes up to this revision, or this RFC 3339 time')
      .addHelpText(
        'after',
        `
Operations: set, delete, expire, counter, transaction, import, rollback.
actor: who made the change: secret, write, read, anonymous, token:ID (the id
kvb mint-token printed) or server (an expiry), @ the client's address. The
server keeps history for --history-retention (default 1 h) and, before that,
the state each key had at the bucket's history floor (kvb bucket show).
Without a key, every change of the bucket (or under --prefix) in revision
order, each revision's keys in byte order, with a key column: what a token
or a credential changed, since a revision or a time.
Read a past value with kvb get KEY --rev N; undo with kvb rollback --to N.
${examples(
  'kvb history config/app',
  'kvb history config/app --values --limit 5',
  'kvb history config/app | jq -r .rev',
  'kvb history config/app --actor token:Xq3v9LrT0aBc',
  'kvb history --actor token:Xq3v9LrT0aBc --prefix app/ --since 2026-01-31T00:00:00Z',
)}`,
      ),
  async run(key, options, command) {
    if (key !== undefined) {
      for (const [flag, given] of [
        ['--prefix', options.prefix],
        ['--since', options.since],
        ['--until', options.until],
      ] as const)
        if (given !== undefined) throw new UsageError(`${flag} is for the bucket's change log: leave out the key (kvb history ${flag} …)`);
    }
    await withClient(command, async ({ client, bucket }) => {
      const format = options.format ?? (stdoutIsTty() ? 'table' : 'jsonl');
      const wanted = options.limit ?? Number.POSITIVE_INFINITY;
      const rows: string[][] = [];
      let cursor: string | undefined;
      let shown = 0;
      do {
        const page = await client.history(bucket(), key, {
          values: options.values,
          limit: Math.min(PAGE, wanted - shown),
          cursor,
          actor: options.actor,
          prefix: options.prefix,
          since: options.since,
          until: options.until,
        });
        for (const [i, line] of page.lines.entries()) {
          shown++;
          const text = page.texts[i]!;
          // The server's line, int64 as a decimal string as in every JSON the CLI prints (JSON values exact).
          if (format === 'jsonl') await data(`${int64AsString(text)}\n`);
          else {
            // The same rendering as ls and watch: bytes as <N bytes>, int64 a number, JSON as stored, expiry relative.
            const value =
              line.value === undefined || line.value === null || line.type === null
                ? ''
                : eventValueCell(line.type, line.value, valueSource(text));
            rows.push([
              String(line.rev),
              ...(key === undefined ? [line.key ?? ''] : []),
              line.operation,
              line.time,
              line.type ?? '-',
              line.size === null ? '-' : String(line.size),
              expiresCell(line.expires_at, Date.now()),
              actorText(line.actor),
              ...(options.values ? [truncate(value, 60)] : []),
            ]);
          }
        }
        cursor = page.nextCursor;
      } while (cursor !== undefined && shown < wanted);
      if (format === 'table')
        await table(
          [
            'rev',
            ...(key === undefined ? ['key'] : []),
            'operation',
            'time',
            'type',
            'size',
            'expires',
            'actor',
            ...(options.values ? ['value'] : []),
          ],
          rows,
        );
    });
  },
});
