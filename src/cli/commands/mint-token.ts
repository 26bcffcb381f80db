import { InvalidArgumentError, Option } from '@commander-js/extra-typings';
import { defineCommand, examples, integer } from '../define-command.js';
import { info, json, line } from '../output.js';
import { UsageError, withClient } from '../session.js';
import { MAX_TTL_SECONDS, PERMISSIONS } from '../../limits.js';

function permissionList(value: string): string[] {
  const list = value
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean);
  if (list.length === 0 || list.some((p) => !(PERMISSIONS as readonly string[]).includes(p))) {
    throw new InvalidArgumentError(`permissions are a comma-separated list of ${PERMISSIONS.join(', ')}`);
  }
  return list;
}

/** `kvb mint-token`: a temporary token limited to a prefix and permissions; prints it alone. */
export const mintToken = defineCommand({
  define: (parent) =>
    parent
      .command('mint-token')
      .description('mint a temporary token limited to a key prefix and permissions (needs the secret key)')
      .requiredOption('--prefix <prefix>', 'keys the token may reach')
      .addOption(
        new Option('--permissions <list>', `comma-separated: ${PERMISSIONS.join(', ')}`).argParser(permissionList).makeOptionMandatory(),
      )
      .addOption(new Option('--ttl <seconds>', 'lifetime in seconds').argParser(integer('--ttl', 1, MAX_TTL_SECONDS)).makeOptionMandatory())
      .option('--json', 'print the whole response, {"access_token": …, "id": …}')
      .addHelpText(
        'after',
        `
The bucket needs a signing key: without one the server answers 503 and kvb
says how to add it (kvb bucket update --rotate-signing-key), exiting 1.
A token used after its expiry is refused with "token expired at <time>", and
outside its prefix with a 403 naming the prefix. The token's id (on stderr, or
"id" with --json) names its changes in history (kvb history; the secret key
can filter with ?actor=token:ID); it does not reveal the token.
${examples(
  'export KVB_TOKEN=$(kvb mint-token --prefix user/42/ --permissions read,write --ttl 600)',
  'kvb mint-token --prefix logs/ --permissions enumerate --ttl 3600 --json',
)}`,
      ),
  async run(options, command) {
    const { KvbHttpError } = await import('../../client/client-errors.js');
    await withClient(command, async ({ client, bucket }) => {
      const id = bucket();
      const answer = await client
        .mintToken(id, { prefix: options.prefix, permissions: options.permissions, ttl: options.ttl })
        .catch((err: unknown) => {
          // The spec's 503 for a bucket without a signing key is a matter of set-up, not of load:
          // retrying cannot help, so it exits 1 with the fix rather than 5.
          if (err instanceof KvbHttpError && err.kind === 'service_unavailable' && /signing.?key/i.test(err.detail ?? '')) {
            throw new UsageError(
              `bucket ${id} has no signing key, so it cannot mint tokens (the server answered 503): give it one with kvb bucket update --rotate-signing-key`,
            );
          }
          throw err;
        });
      if (options.json) await json(answer);
      else {
        await line(answer.access_token);
        if (answer.id) info(`token id ${answer.id} (history records this token's changes under it)`);
      }
    });
  },
});
