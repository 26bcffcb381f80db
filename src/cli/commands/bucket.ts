import type { Command } from 'commander';
import type { BucketChanges, BucketPolicy } from '../../client/kvb-client.js';
import { readConfig, saveProfile } from '../config.js';
import { info, json, stdinIsTty, verticalTable } from '../output.js';
import { generateKey } from '../random-key.js';
import { UsageError, withClient } from '../session.js';

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

/** `kvb bucket show`: the policy projection, a table for people or `--json`. */
export async function show(options: { json?: boolean }, command: Command): Promise<void> {
  await withClient(command, async ({ client, bucket }) => {
    const id = bucket();
    const policy = await client.policy(id);
    if (options.json) await json(policy);
    else await verticalTable(policyRows(id, policy));
  });
}

/** `kvb bucket update`: one PATCH with every change asked for. */
export async function update(options: UpdateOptions, command: Command): Promise<void> {
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
}

/** `kvb bucket delete`: asks first (on a terminal) unless --yes. */
export async function remove(options: { yes?: boolean }, command: Command): Promise<void> {
  await withClient(command, async ({ client, bucket }) => {
    const id = bucket();
    if (!options.yes) {
      if (!stdinIsTty()) throw new UsageError('refusing to delete without confirmation: pass --yes');
      const prompts = await import('@clack/prompts');
      const answer = await prompts.confirm({ message: `Delete bucket ${id} and all its keys?`, initialValue: false, output: process.stderr });
      if (prompts.isCancel(answer) || !answer) throw new UsageError('not deleted');
    }
    await client.deleteBucket(id);
    info(`deleted bucket ${id}`);
  });
}

/** `kvb bucket exists`: exit 0 or 2, nothing printed. */
export async function exists(_options: unknown, command: Command): Promise<void> {
  await withClient(command, async ({ client, bucket }) => {
    if (!(await client.bucketExists(bucket()))) process.exitCode = 2;
  });
}
