import { clientKit, bucketUrl, jsonBody } from './client-kit.js';
import { EXPIRY_PREFIX, SWEEP_BOUND_MS, awaitSweeps, expiryClient, finalExpiryReads } from './expiry-workload.js';
import { now } from './recorder.js';
import { revisionOf, send } from './send.js';
import { mintToken, newCredentialHistory, rotator, tokenClient } from './token-workload.js';
import { TYPED_KEYS, TYPED_PREFIX, readTyped, typedName, typedValueClient } from './typed-values.js';
import type { WatcherOptions } from './watchers.js';
import { type WorkloadContext, sleep } from './workload.js';

/**
 * The workloads a scenario may add to the register, counter and bank clients (scenarios.ts
 * `extra`), each on keys of its own prefix so the others' histories stay as they were:
 * expiring keys (`e/`, expiry-workload.ts), values of every type and size (`v/`, typed-values.ts),
 * temporary tokens with a signing-key rotation (`t/`, token-workload.ts), and watchers of part of
 * the bucket: one with `prefix=v/`, one with a token for `e/`.
 */
export interface ExtraWorkloads {
  expiry?: boolean;
  values?: boolean;
  tokens?: boolean;
  scopedWatchers?: boolean;
}

/**
 * Before the watchers start: gives the bucket a signing key when tokens are used (the suite's
 * bucket has none, and no `secret_key`, so anonymous requests may set it), and returns the scoped
 * watchers to start with the others.
 */
export async function prepareExtra(extra: ExtraWorkloads | undefined, ctx: WorkloadContext): Promise<WatcherOptions[]> {
  if (!extra?.tokens && !extra?.scopedWatchers) return [];
  const ex = await send(bucketUrl(ctx.instances[0]!, ctx.bucket), {
    method: 'PATCH',
    ...jsonBody({ signing_key: 'robustness-initial-key' }),
  });
  if (ex.answer?.status !== 204) throw new Error(`could not give the bucket a signing key: ${ex.answer?.status ?? ex.error?.code}`);
  if (!extra.scopedWatchers) return [];
  return [
    { prefix: TYPED_PREFIX },
    {
      tokenPrefix: EXPIRY_PREFIX,
      token: async (instance) => (await mintToken(instance, ctx.bucket, EXPIRY_PREFIX, 'read', 600))?.token,
    },
  ];
}

/** The extra clients, started with the others; each promise ends when the run stops. */
export function extraClients(
  extra: ExtraWorkloads | undefined,
  ctx: WorkloadContext,
  errors: string[],
  onError: (what: string) => (err: unknown) => void,
): Array<Promise<void>> {
  if (!extra) return [];
  const clients: Array<Promise<void>> = [];
  if (extra.expiry) for (let i = 0; i < 2; i++) clients.push(expiryClient(ctx, i).catch(onError(`expiry client ${i}`)));
  if (extra.values) for (let i = 0; i < 2; i++) clients.push(typedValueClient(ctx, i + 1, errors).catch(onError(`value client ${i}`)));
  if (extra.tokens) {
    const credentials = newCredentialHistory();
    ctx.recorder.credentials = credentials;
    for (let i = 0; i < 2; i++) clients.push(tokenClient(ctx, i, credentials).catch(onError(`token client ${i}`)));
    clients.push(rotator(ctx, credentials).catch(onError('rotator')));
  }
  return clients;
}

/**
 * Once the clients stopped and the faults are healed: waits for the sweeper to record every
 * expiry (bounded), reads every extra key from every instance, and writes a key under each
 * watched prefix in one last transaction, so every watcher, whatever its prefix, has an event at
 * the final revision to catch up to (retried while something else committed after it).
 */
export async function settleExtra(extra: ExtraWorkloads | undefined, ctx: WorkloadContext, errors: string[]): Promise<void> {
  if (!extra) return;
  if (extra.expiry) ctx.recorder.expiry = { settledAt: await awaitSweeps(ctx.recorder), sweepBoundMs: SWEEP_BOUND_MS };
  for (let i = 0; i < ctx.instances.length; i++) {
    const kit = clientKit(ctx, i, { unanswered: false });
    if (extra.expiry) await finalExpiryReads(ctx, kit);
    if (extra.values) for (const key of TYPED_KEYS) await readTyped(ctx, kit, key);
  }
  if (!extra.scopedWatchers) return;
  const kit = clientKit(ctx, 0, { unanswered: false });
  const marks = [`${EXPIRY_PREFIX}~end`, `${TYPED_PREFIX}~end`];
  const named = (key: string) => (key.startsWith(TYPED_PREFIX) ? typedName('text', Buffer.from('end')) : 'end');
  for (let attempt = 0; attempt < 10; attempt++) {
    const { ex } = await kit.exchange(
      'final-mark',
      bucketUrl(kit.instance, ctx.bucket),
      { method: 'POST', ...jsonBody({ txn: marks.map((key) => ({ set: key, value: 'end' })) }) },
      (answered, ok) => {
        const revision = ok ? revisionOf(answered.answer!) : undefined;
        return marks.map((key) => ({
          model: 'register' as const,
          key,
          input: { f: 'write' as const, value: named(key) },
          output: { ...(revision !== undefined && { revision }) },
        }));
      },
    );
    const marked = ex.answer?.status === 204 ? revisionOf(ex.answer) : undefined;
    const listing = await send(`${bucketUrl(kit.instance, ctx.bucket)}/?format=json&limit=1`);
    if (marked !== undefined && listing.answer?.status === 200 && revisionOf(listing.answer) === marked) return;
    await sleep(250);
  }
  errors.push(`could not make the final revision a write under every watched prefix (at ${now().toFixed(0)})`);
}
