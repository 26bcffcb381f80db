import { Option } from '@commander-js/extra-typings';
import { defineCommand, examples, integer } from '../define-command.js';
import { saveProfile } from '../config.js';
import { anonymousAccessLeft } from '../../client/anonymous-access.js';
import { info, line, warn } from '../output.js';
import { withClient } from '../session.js';
import { DEFAULT_BUCKET_TTL_SECONDS, MAX_TTL_SECONDS } from '../../limits.js';

/** `kvb create-bucket`: creates a bucket and prints its id alone, for `B=$(kvb create-bucket …)`. */
export const createBucket = defineCommand({
  define: (parent) =>
    parent
      .command('create-bucket')
      .description('create a bucket and print its id')
      .requiredOption('--email <email>', 'admin contact for the bucket (required)')
      .option('--secret-key <key>', 'admin credential (policy, tokens, everything)')
      .option('--read-key <key>', 'credential for reading and listing')
      .option('--write-key <key>', 'credential for writing')
      .option('--signing-key <key>', 'key the server signs temporary tokens with')
      .addOption(
        new Option(
          '--default-ttl <seconds>',
          `TTL of keys set without one (0 = no expiry; server default ${DEFAULT_BUCKET_TTL_SECONDS})`,
        ).argParser(integer('--default-ttl', 0, MAX_TTL_SECONDS)),
      )
      .option('--save [profile]', 'save url, bucket and secret key as a profile (default: --profile, or "default")')
      .addHelpText(
        'after',
        `
Prints the bucket id alone on stdout. A bucket left without a read or write
key (or a secret key) is open to anonymous callers for that: a warning on
stderr says so, as kvb init does. A --token (or KVB_TOKEN) given
explicitly is sent as the server's bucket-creation key.
${examples(
  'B=$(kvb create-bucket --email me@example.com --secret-key "$S")',
  'kvb create-bucket --email me@example.com --secret-key "$S" --save work',
  'kvb --url https://kv.example.com create-bucket --email me@example.com --default-ttl 0',
)}`,
      ),
  async run(options, command) {
    await withClient(
      command,
      async ({ client, connection }) => {
        const id = await client.createBucket({
          email: options.email,
          secret_key: options.secretKey,
          read_key: options.readKey,
          write_key: options.writeKey,
          signing_key: options.signingKey,
          default_ttl: options.defaultTtl,
        });
        await line(id);
        const set = Object.entries({ secret_key: options.secretKey, read_key: options.readKey, write_key: options.writeKey })
          .filter(([, value]) => value !== undefined && value !== '')
          .map(([name]) => name);
        const left = anonymousAccessLeft(set);
        if (left.length > 0) warn(`ANONYMOUS ACCESS to bucket ${id}: anyone who can reach the server can ${left.join('; ')}.`);
        if (options.save !== undefined) {
          const name = typeof options.save === 'string' ? options.save : connection.profileName;
          saveProfile(name, { url: connection.url, bucket: id, ...(options.secretKey ? { secret_key: options.secretKey } : {}) });
          info(`saved profile ${JSON.stringify(name)}`);
        }
      },
      // A profile's secret key belongs to another bucket: only an explicit token is a creation key.
      { allowMissingProfile: true, explicitTokenOnly: true },
    );
  },
});
