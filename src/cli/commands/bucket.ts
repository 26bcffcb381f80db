import { Option } from '@commander-js/extra-typings';
import type { BucketChanges, BucketPolicy, BucketUsage } from '../../client/kvb-http.js';
import { readConfig, saveProfile } from '../config.js';
import { info, json, stdinIsTty, stdoutIsTty, verticalTable } from '../output.js';
import { defineCommand, defineGroup, examples, integer } from '../define-command.js';
import { generateKey } from '../random-key.js';
import { UsageError, withClient } from '../session.js';
import { MAX_TTL_SECONDS } from '../../limits.js';
import { EXIT_CODES } from '../../errors.js';

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

const count = (n: number) => n.toLocaleString('en-US');

function policyRows(bucket: string, p: BucketPolicy, usage?: BucketUsage): Array<[string, string]> {
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
    ...(usage
      ? ([
          ['keys stored', `${count(usage.keys)}${usage.quotaKeys === undefined ? '' : ` of ${count(usage.quotaKeys)}`}`],
          [
            'bytes stored',
            `${count(usage.bytes)}${usage.quotaBytes === undefined ? '' : ` of ${count(usage.quotaBytes)}`} (keys + values)`,
          ],
          ...(usage.historyFloor === undefined
            ? []
            : ([
                [
                  'history',
                  `from revision ${usage.historyFloor}${usage.revision === undefined ? '' : ` to ${usage.revision}`} (kvb get --rev, kvb ls --rev, kvb rollback --to)`,
                ],
              ] as Array<[string, string]>)),
        ] as Array<[string, string]>)
      : []),
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
    if (signing !== undefined)
      throw new UsageError('--rotate-signing-key generates the key: do not combine it with --signing-key or --clear-signing-key');
    signing = rotatedSigningKey = generateKey();
  }
  if (signing !== undefined) changes.signing_key = signing;
  if (options.defaultTtl !== undefined) changes.default_ttl = options.defaultTtl;
  if (Object.keys(changes).length === 0) throw new UsageError('nothing to update: see kvb bucket update --help');
  return rotatedSigningKey === undefined ? { changes } : { changes, rotatedSigningKey };
}

/** `kvb bucket show`: the policy projection, a table for people or `--json`. */
const show = defineCommand({
  define: (parent) =>
    parent
      .command('show')
      .description('show the policy: which credentials are set, default TTL, anonymous access, keys and bytes stored')
      .option('--json', "print the server's policy projection as JSON (the default when piped)")
      .addHelpText('after', examples('kvb bucket show', 'kvb bucket show --json | jq .anonymous_access')),
  async run(options, command) {
    await withClient(command, async ({ client, bucket }) => {
      const id = bucket();
      const { policy, usage } = await client.policyAndUsage(id);
      // --json (the default in a pipe) stays the server's projection exactly; usage is shown in the table.
      if (options.json || !stdoutIsTty()) await json(policy);
      else await verticalTable(policyRows(id, policy, usage));
    });
  },
});

/** `kvb bucket update`: one PATCH with every change asked for. */
const update = defineCommand({
  define: (parent) =>
    parent
      .command('update')
      .description('set, rotate or clear credentials and the default TTL')
      .option('--secret-key <key>', 'set a new admin key (a profile holding the old one is updated)')
      .option('--read-key <key>', 'set the read key')
      .option('--clear-read-key', 'remove the read key (anonymous read and list allowed)')
      .option('--write-key <key>', 'set the write key')
      .option('--clear-write-key', 'remove the write key (anonymous write allowed)')
      .option('--signing-key <key>', 'set the token signing key (invalidates earlier tokens)')
      .option('--rotate-signing-key', 'generate a new random signing key (invalidates earlier tokens)')
      .option('--clear-signing-key', 'remove the signing key (no more tokens)')
      .addOption(
        new Option('--default-ttl <seconds>', 'TTL of keys set without one (0 = no expiry)').argParser(
          integer('--default-ttl', 0, MAX_TTL_SECONDS),
        ),
      )
      .addHelpText(
        'after',
        examples(
          'kvb bucket update --read-key "$R"',
          'kvb bucket update --clear-read-key --default-ttl 0',
          'kvb bucket update --rotate-signing-key',
        ),
      ),
  async run(options, command) {
    const { changes, rotatedSigningKey } = changesFrom(options);
    await withClient(command, async ({ client, bucket, connection }) => {
      const id = bucket();
      await client.updateBucket(id, changes);
      if (rotatedSigningKey !== undefined) info('signing key rotated: earlier tokens are no longer valid');
      if (changes.secret_key !== undefined && connection.sources.token === 'profile') {
        const profile = readConfig().profiles[connection.profileName];
        if (profile?.bucket === id && profile.secret_key !== undefined) {
          saveProfile(connection.profileName, { ...profile, secret_key: changes.secret_key });
          info(`profile ${JSON.stringify(connection.profileName)} now holds the new secret key`);
        }
      }
      info('updated');
    });
  },
});

/** `kvb bucket delete`: asks first (on a terminal) unless --yes. */
const remove = defineCommand({
  define: (parent) =>
    parent
      .command('delete')
      .description('delete the bucket and every key in it (asks first unless --yes)')
      .option('-y, --yes', 'do not ask for confirmation')
      .addHelpText('after', examples('kvb bucket delete', 'kvb --bucket "$B" bucket delete --yes')),
  async run(options, command) {
    await withClient(command, async ({ client, bucket }) => {
      const id = bucket();
      if (!options.yes) {
        if (!stdinIsTty()) throw new UsageError('refusing to delete without confirmation: pass --yes');
        const prompts = await import('@clack/prompts');
        const answer = await prompts.confirm({
          message: `Delete bucket ${id} and all its keys?`,
          initialValue: false,
          output: process.stderr,
        });
        if (prompts.isCancel(answer) || !answer) throw new UsageError('not deleted');
      }
      await client.deleteBucket(id);
      info(`deleted bucket ${id}`);
    });
  },
});

/** `kvb bucket exists`: exit 0 or 2, nothing printed. */
const exists = defineCommand({
  define: (parent) =>
    parent
      .command('exists')
      .description('exit 0 if the bucket exists and the credential is admin, 2 otherwise (prints nothing)')
      .addHelpText('after', examples('kvb bucket exists && echo ok', 'kvb --bucket "$B" bucket exists || echo "no such bucket"')),
  async run(_options, command) {
    await withClient(command, async ({ client, bucket }) => {
      if (!(await client.bucketExists(bucket()))) process.exitCode = EXIT_CODES.notFound;
    });
  },
});

/** `kvb bucket show|update|delete|exists`. */
export const bucket = defineGroup(
  (parent) =>
    parent
      .command('bucket')
      .description("show, change, check or delete the bucket's policy (needs the secret key)")
      .addHelpText('after', examples('kvb bucket show', 'kvb bucket update --read-key "$R" --default-ttl 3600', 'kvb bucket delete --yes')),
  [show, update, remove, exists],
);
