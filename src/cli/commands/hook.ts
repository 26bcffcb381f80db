import { EXIT_CODES } from '../../errors.js';
import { Option } from '@commander-js/extra-typings';
import type { WebhookAttempt, WebhookInfo, WebhookKind } from '../../client/kvb-http.js';
import { data, info, json, stdoutIsTty, table, verticalTable } from '../output.js';
import { defineCommand, defineGroup, examples, integer } from '../define-command.js';
import { UsageError, withClient } from '../session.js';
import { CHANGE_KINDS } from '../../values/change-kind.js';

const KINDS: readonly WebhookKind[] = CHANGE_KINDS;
/** Attempts kept per webhook by the server (the most `deliveries --limit` may ask for). */
const LOG_KEEP = 50;

function kindsOf(text: string): WebhookKind[] {
  const kinds = text.split(',').map((k) => k.trim());
  const wrong = kinds.find((k) => !(KINDS as readonly string[]).includes(k));
  if (wrong !== undefined || kinds.length === 0) throw new UsageError(`--kinds takes a comma-separated list of ${KINDS.join(', ')}`);
  return kinds as WebhookKind[];
}

const stateOf = (w: WebhookInfo) =>
  w.state === 'paused' ? `paused: ${w.paused_reason ?? ''}` : w.attempts > 0 ? `retrying (${w.attempts} failed)` : 'active';

/** `kvb hook add URL`: prints the signing secret once (stdout), the id on stderr. */
const add = defineCommand({
  define: (parent) =>
    parent
      .command('add')
      .description('deliver every change under a prefix to URL (POST, signed); prints the signing secret, shown only now')
      .argument('<url>', 'https:// URL of the receiver')
      .option('--prefix <prefix>', 'only keys with this prefix (default: every key)')
      .addOption(new Option('--kinds <list>', 'change kinds to deliver: set, delete, expire (default: all)').argParser(kindsOf))
      .option('--json', 'print the whole answer as JSON (with the secret)')
      .addHelpText('after', examples('kvb hook add https://hooks.example.com/kvb --prefix orders/', 'SECRET=$(kvb hook add "$URL")')),
  async run(url, options, command) {
    await withClient(command, async ({ client, bucket }) => {
      const made = await client.addWebhook(bucket(), {
        url,
        ...(options.prefix !== undefined && { prefix: options.prefix }),
        ...(options.kinds !== undefined && { kinds: options.kinds }),
      });
      if (options.json) return json(made);
      info(`added webhook ${made.id} (its signing secret, on stdout, is shown only now)`);
      await data(`${made.secret}\n`);
    });
  },
});

/** `kvb hook ls`. */
const ls = defineCommand({
  define: (parent) =>
    parent
      .command('ls')
      .description("list the bucket's webhooks: id, state, position, prefix, URL")
      .option('--json', 'print JSON (the default when piped)')
      .addHelpText('after', examples('kvb hook ls', 'kvb hook ls --json | jq -r ".[].id"')),
  async run(options, command) {
    await withClient(command, async ({ client, bucket }) => {
      const hooks = await client.listWebhooks(bucket());
      if (options.json || !stdoutIsTty()) return json(hooks);
      await table(
        ['ID', 'STATE', 'POSITION', 'PREFIX', 'URL'],
        hooks.map((w) => [w.id, stateOf(w), String(w.position), w.prefix, w.url]),
      );
    });
  },
});

/** `kvb hook rm ID`. */
const rm = defineCommand({
  define: (parent) =>
    parent
      .command('rm')
      .description('delete a webhook')
      .argument('<id>', 'the webhook id (kvb hook ls)')
      .addHelpText('after', examples('kvb hook rm wh_3kTq9vXb2LmA')),
  async run(id, _options, command) {
    await withClient(command, async ({ client, bucket }) => {
      await client.deleteWebhook(bucket(), id);
      info(`deleted webhook ${id}`);
    });
  },
});

/** `kvb hook pause ID` / `kvb hook resume ID`. */
const setState = (name: 'pause' | 'resume') =>
  defineCommand({
    define: (parent) =>
      parent
        .command(name)
        .description(name === 'pause' ? 'stop delivering (changes wait at the position)' : 'deliver again, from the stored position')
        .argument('<id>', 'the webhook id (kvb hook ls)')
        .addHelpText('after', examples(`kvb hook ${name} wh_3kTq9vXb2LmA`)),
    async run(id, _options, command) {
      await withClient(command, async ({ client, bucket }) => {
        const w = await client.setWebhookState(bucket(), id, name === 'pause' ? 'paused' : 'active');
        info(`webhook ${id}: ${stateOf(w)}, at revision ${w.position}`);
      });
    },
  });

/** `kvb hook rotate ID`: prints the new secret. */
const rotate = defineCommand({
  define: (parent) =>
    parent
      .command('rotate')
      .description('replace the signing secret; prints the new one (shown only now)')
      .argument('<id>', 'the webhook id (kvb hook ls)')
      .addHelpText('after', examples('SECRET=$(kvb hook rotate wh_3kTq9vXb2LmA)')),
  async run(id, _options, command) {
    await withClient(command, async ({ client, bucket }) => {
      const { secret } = await client.rotateWebhookSecret(bucket(), id);
      await data(`${secret}\n`);
    });
  },
});

const attemptRow = (a: WebhookAttempt) => [
  a.attempted_at,
  a.first_revision === a.last_revision ? String(a.last_revision) : `${a.first_revision}-${a.last_revision}`,
  a.status === null ? '-' : String(a.status),
  `${a.latency_ms} ms`,
  a.error ?? 'ok',
];

/** `kvb hook test ID`: one signed `test` event now. */
const test = defineCommand({
  define: (parent) =>
    parent
      .command('test')
      .description('send one signed test event now and show how the receiver answered')
      .argument('<id>', 'the webhook id (kvb hook ls)')
      .option('--json', 'print JSON (the default when piped)')
      .addHelpText('after', examples('kvb hook test wh_3kTq9vXb2LmA')),
  async run(id, options, command) {
    await withClient(command, async ({ client, bucket }) => {
      const attempt = await client.testWebhook(bucket(), id);
      if (options.json || !stdoutIsTty()) await json(attempt);
      else
        await verticalTable([
          ['status', attempt.status === null ? 'no answer' : String(attempt.status)],
          ['latency', `${attempt.latency_ms} ms`],
          ['result', attempt.error ?? 'ok'],
        ]);
      // The receiver did not take it (no answer, or not a 2xx): as a server kvb cannot reach.
      if (!attempt.ok) process.exitCode = EXIT_CODES.unreachable;
    });
  },
});

/** `kvb hook deliveries ID`: the delivery log. */
const deliveries = defineCommand({
  define: (parent) =>
    parent
      .command('deliveries')
      .description('the latest delivery attempts, newest first: time, revisions, status, latency, error')
      .argument('<id>', 'the webhook id (kvb hook ls)')
      .addOption(new Option('--limit <n>', `how many (at most ${LOG_KEEP})`).argParser(integer('--limit', 1, LOG_KEEP)))
      .option('--json', 'print JSON (the default when piped)')
      .addHelpText('after', examples('kvb hook deliveries wh_3kTq9vXb2LmA --limit 5')),
  async run(id, options, command) {
    await withClient(command, async ({ client, bucket }) => {
      const log = await client.webhookDeliveries(bucket(), id, options.limit === undefined ? {} : { limit: options.limit });
      if (options.json || !stdoutIsTty()) return json(log);
      await table(['TIME', 'REVISIONS', 'STATUS', 'LATENCY', 'RESULT'], log.map(attemptRow));
    });
  },
});

/** `kvb hook add|ls|rm|pause|resume|rotate|test|deliveries`. */
export const hook = defineGroup(
  (parent) =>
    parent
      .command('hook')
      .description("the bucket's webhooks: changes POSTed to a URL, signed, in order (needs the secret key)")
      .addHelpText(
        'after',
        examples('kvb hook add https://hooks.example.com/kvb --prefix orders/', 'kvb hook ls', 'kvb hook deliveries ID'),
      ),
  [add, ls, rm, setState('pause'), setState('resume'), rotate, test, deliveries],
);
