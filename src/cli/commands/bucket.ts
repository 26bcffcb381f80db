import { type Command, Option } from 'commander';
import type { BucketChanges, BucketPolicy } from '../../client/kvb-client.js';
import { readConfig, saveProfile } from '../config.js';
import { info, json, stdinIsTty, verticalTable } from '../output.js';
import { generateKey } from '../random-key.js';
import { UsageError, integerOption, withClient } from '../session.js';

interface UpdateOptions {
  secretKey?: string;
  readKey?: string;
  writeKey?: string;
  signingKey?: string;
  clearReadKey?: boolean;
  clearWriteKey?: boolean;
  clearSigningKey?: boolean;
  rotateSigningKey?: boolean;
  defaultTtl?: number;
}

const yesNo = (b: boolean) => (b ? 'yes' : 'no');

function policyRows(bucket: string, p: BucketPolicy): Array<[string, string]> {
  const anonymous = Object.entries(p.anonymous_access)
    .filter(([, allowed]) => allowed)
    .map(([name]) => name);
  return [
    ['bucket', bucket],
    ['default_ttl', p.default_ttl === 0 ? '0 (no expiry)' : `${p.default_ttl} s`],
    ['secret key', yesNo(p.has_secret_key)],
    ['read key', yesNo(p.has_read_key)],
    ['write key', yesNo(p.has_write_key)],
    ['signing key', yesNo(p.has_signing_key)],
    ['signing key generation', String(p.signing_key_generation)],
    ['anonymous access', anonymous.length > 0 ? anonymous.join(', ') : 'none'],
  ];
}

/** The PATCH body for the update flags; a usage error for contradictions or nothing to do. */
export function changesFrom(options: UpdateOptions): { changes: BucketChanges; rotatedSigningKey?: string } {
  const changes: BucketChanges = {};
  const pair = (name: string, set: string | undefined, clear: boolean | undefined) => {
    if (set !== undefined && clear) throw new UsageError(`--${name} and --clear-${name} contradict each other`);
    return set !== undefined ? set : clear ? null : undefined;
  };
  if (options.secretKey !== undefined) changes.secret_key = options.secretKey;
  const read = pair('read-key', options.readKey, options.clearReadKey);
  if (read !== undefined) changes.read_key = read;
  const write = pair('write-key', options.writeKey, options.clearWriteKey);
  if (write !== undefined) changes.write_key = write;
  let signing = pair('signing-key', options.signingKey, options.clearSigningKey);
  let rotatedSigningKey: string | undefined;
  if (options.rotateSigningKey) {
    if (signing !== undefined) throw new UsageError('--rotate-signing-key generates the key: do not combine it with --signing-key or --clear-signing-key');
    signing = rotatedSigningKey = generateKey();
  }
  if (signing !== undefined) changes.signing_key = signing;
  if (options.defaultTtl !== undefined) changes.default_ttl = options.defaultTtl;
  if (Object.keys(changes).length === 0) throw new UsageError('nothing to update: see kvb bucket update --help');
  return rotatedSigningKey === undefined ? { changes } : { changes, rotatedSigningKey };
}

/** `kvb bucket show | update | delete | exists`: the bucket's policy (needs the secret key). */
export function registerBucket(program: Command): void {
  const bucket = program
    .command('bucket')
    .description("show, change, check or delete the bucket's policy (needs the secret key)")
    .addHelpText('after', '\nExamples:\n  kvb bucket show\n  kvb bucket update --read-key "$R" --default-ttl 3600\n  kvb bucket delete --yes');

  bucket
    .command('show')
    .description('show the policy: which credentials are set, default TTL, anonymous access')
    .option('--json', "print the server's policy projection as JSON")
    .addHelpText('after', '\nExamples:\n  kvb bucket show\n  kvb bucket show --json | jq .anonymous_access')
    .action(async (options: { json?: boolean }, command: Command) => {
      await withClient(command, async ({ client, bucket: id }) => {
        const bucketId = id();
        const policy = await client.policy(bucketId);
        if (options.json) await json(policy);
        else await verticalTable(policyRows(bucketId, policy));
      });
    });

  bucket
    .command('update')
    .description('set, rotate or clear credentials and the default TTL')
    .option('--secret-key <key>', 'set a new admin key (the profile in use is updated if it holds the old one)')
    .option('--read-key <key>', 'set the read key')
    .option('--clear-read-key', 'remove the read key (anonymous read and list allowed)')
    .option('--write-key <key>', 'set the write key')
    .option('--clear-write-key', 'remove the write key (anonymous write allowed)')
    .option('--signing-key <key>', 'set the token signing key (invalidates earlier tokens)')
    .option('--rotate-signing-key', 'generate a new random signing key (invalidates earlier tokens)')
    .option('--clear-signing-key', 'remove the signing key (no more tokens)')
    .addOption(new Option('--default-ttl <seconds>', 'TTL of keys set without one (0 = no expiry)').argParser(integerOption('--default-ttl', 0, 2147483647)))
    .addHelpText('after', '\nExamples:\n  kvb bucket update --read-key "$R"\n  kvb bucket update --clear-read-key --default-ttl 0\n  kvb bucket update --rotate-signing-key')
    .action(async (options: UpdateOptions, command: Command) => {
      const { changes, rotatedSigningKey } = changesFrom(options);
      await withClient(command, async ({ client, bucket: id, connection }) => {
        const bucketId = id();
        await client.updateBucket(bucketId, changes);
        if (rotatedSigningKey !== undefined) info('signing key rotated: earlier tokens are no longer valid');
        if (changes.secret_key !== undefined && connection.sources.token === 'profile') {
          const profile = readConfig().profiles[connection.profileName];
          if (profile?.bucket === bucketId && profile.secret_key !== undefined) {
            saveProfile(connection.profileName, { ...profile, secret_key: changes.secret_key });
            info(`profile ${JSON.stringify(connection.profileName)} now holds the new secret key`);
          }
        }
        info('updated');
      });
    });

  bucket
    .command('delete')
    .description('delete the bucket and every key in it (asks first unless --yes)')
    .option('-y, --yes', 'do not ask for confirmation')
    .addHelpText('after', '\nExamples:\n  kvb bucket delete\n  kvb --bucket "$B" bucket delete --yes')
    .action(async (options: { yes?: boolean }, command: Command) => {
      await withClient(command, async ({ client, bucket: id }) => {
        const bucketId = id();
        if (!options.yes) {
          if (!stdinIsTty()) throw new UsageError('refusing to delete without confirmation: pass --yes');
          const prompts = await import('@clack/prompts');
          const answer = await prompts.confirm({ message: `Delete bucket ${bucketId} and all its keys?`, initialValue: false, output: process.stderr });
          if (prompts.isCancel(answer) || !answer) throw new UsageError('not deleted');
        }
        await client.deleteBucket(bucketId);
        info(`deleted bucket ${bucketId}`);
      });
    });

  bucket
    .command('exists')
    .description('exit 0 if the bucket exists and the credential is admin, 2 otherwise (prints nothing)')
    .addHelpText('after', '\nExamples:\n  kvb bucket exists && echo ok\n  kvb --bucket "$B" bucket exists || kvb create-bucket --email me@example.com')
    .action(async (_options: unknown, command: Command) => {
      await withClient(command, async ({ client, bucket: id }) => {
        if (!(await client.bucketExists(id()))) process.exitCode = 2;
      });
    });
}
