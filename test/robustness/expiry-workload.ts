import type { RegisterInput, RegisterOutput } from './history.js';
import { type ClientKit, type Drafts, bucketUrl, clientKit, jsonBody, keyUrl, pacedLoop } from './client-kit.js';
import { type Recorder, fromWall, now } from './recorder.js';
import { type Answer, header, revisionOf } from './send.js';
import { type WorkloadContext, sleep } from './workload.js';

/**
 * Expiring keys: clients that write `e/0`..`e/2` with TTLs of 1 or 2 s (and at times without one,
 * which clears the expiry), read them while they expire, create them over an expired value, compare
 * and set them, and delete them, often after they expired (a 404 that must write nothing). Every
 * write records the TTL it asked and, when answered, the expiry it was given (`Kvb-Expires-At`),
 * so the key model (checkers/key-model.ts) knows when each value stops being live; the server runs
 * with `--sweep-interval 1`, so the watchers see the sweeper's `expire` events.
 */
export const EXPIRY_KEYS = ['e/0', 'e/1', 'e/2'];
export const EXPIRY_PREFIX = 'e/';
/** How long after a key's expiry the sweeper must have recorded it, once the run has settled (watch-scope.ts). */
export const SWEEP_BOUND_MS = 10_000;

/** A register read of a key (a GET's answer: 200 with the value, 404 absent). */
export function readDraft(key: string, answer: Answer | undefined, value: string | null): Drafts {
  const revision = answer?.status === 200 ? revisionOf(answer) : undefined;
  return [{ model: 'register', key, input: { f: 'read' }, output: { value, ...(revision !== undefined && { revision }) } }];
}

/** The expiry an answer to a write names (`Kvb-Expires-At`), on the run's clock. */
function answeredExpiry(answer: Answer | undefined): number | undefined {
  const at = answer && header(answer, 'kvb-expires-at');
  return at === undefined ? undefined : fromWall(Date.parse(at));
}

export async function expiryClient(ctx: WorkloadContext, index: number): Promise<void> {
  const state = { unanswered: false };
  const kit = clientKit(ctx, index, state);
  const { random, instance } = kit;
  const seen = new Map<string, number>();
  let n = 0;

  const write = async (key: string, mode: 'write' | 'create' | 'cas', ttl: number | undefined) => {
    const value = `x${kit.client}.${n++}`;
    const headers: Record<string, string> = { 'content-type': 'text/plain' };
    const rev = seen.get(key);
    if (mode === 'cas') {
      if (rev === undefined) return readExpiring(ctx, kit, key, seen);
      headers['if-match'] = `"${rev}"`;
    }
    if (mode === 'create') headers['if-none-match'] = '*';
    const query = ttl === undefined ? '' : `?ttl=${ttl}`;
    const ttlField = ttl === undefined ? {} : { ttl };
    const input: RegisterInput = mode === 'cas' ? { f: 'cas', rev: rev!, value, ...ttlField } : { f: mode, value, ...ttlField };
    await kit.exchange(
      `expiring-${mode}`,
      `${keyUrl(instance, ctx.bucket, key)}${query}`,
      { method: 'PUT', headers, body: value },
      (ex, ok) => {
        const output: RegisterOutput = {};
        if (ok) {
          const revision = revisionOf(ex.answer!);
          const expiresAt = answeredExpiry(ex.answer);
          if (revision !== undefined) output.revision = revision;
          if (expiresAt !== undefined) output.expiresAt = expiresAt;
          if (revision !== undefined) seen.set(key, revision);
        }
        return [{ model: 'register', key, input, output }];
      },
    );
  };

  await pacedLoop(ctx, random, state, async () => {
    const key = random.pick(EXPIRY_KEYS);
    const roll = random.next();
    const ttl = random.int(1, 2);
    if (roll < 0.3) await readExpiring(ctx, kit, key, seen);
    else if (roll < 0.55) await write(key, 'write', ttl);
    else if (roll < 0.62) await write(key, 'write', undefined);
    else if (roll < 0.74) await write(key, 'create', ttl);
    else if (roll < 0.82) await write(key, 'cas', random.chance(0.5) ? ttl : undefined);
    else if (roll < 0.94) await deleteExpiring(ctx, kit, key);
    else await multiReadExpiring(ctx, kit);
  });
}

/** A GET: the value, or 404 (absent or expired); `seen` learns the key's revision. */
async function readExpiring(ctx: WorkloadContext, kit: ClientKit, key: string, seen?: Map<string, number>): Promise<void> {
  await kit.exchange(
    seen ? 'expiring-read' : 'final-read',
    keyUrl(kit.instance, ctx.bucket, key),
    {},
    (ex, ok) => {
      const found = ex.answer?.status === 200;
      const revision = found ? revisionOf(ex.answer!) : undefined;
      if (ok && revision !== undefined) seen?.set(key, revision);
      return readDraft(key, ex.answer, found ? ex.answer!.text : null);
    },
    [404],
  );
}

/** A DELETE: 204 while live, 404 (nothing written) once expired. */
async function deleteExpiring(ctx: WorkloadContext, kit: ClientKit, key: string): Promise<void> {
  await kit.exchange('expiring-delete', keyUrl(kit.instance, ctx.bucket, key), { method: 'DELETE' }, (ex, ok) => {
    const revision = ok ? revisionOf(ex.answer!) : undefined;
    return [{ model: 'register', key, input: { f: 'delete' }, output: { ...(revision !== undefined && { revision }) } }];
  });
}

/** Gets of every expiring key in one transaction: each as of one revision, expired ones null. */
async function multiReadExpiring(ctx: WorkloadContext, kit: ClientKit): Promise<void> {
  await kit.exchange(
    'expiring-txn-read',
    bucketUrl(kit.instance, ctx.bucket),
    { method: 'POST', ...jsonBody({ txn: EXPIRY_KEYS.map((key) => ({ get: key })) }) },
    (ex, ok) => {
      let results: Array<{ value: string; rev: number } | null> | undefined;
      if (ok) {
        results = (JSON.parse(ex.answer!.text) as { results: Array<{ value: string; rev: number } | null> }).results;
        if (!Array.isArray(results))
          throw new Error(`a transaction of gets answered 2xx without results: ${ex.answer!.text.slice(0, 200)}`);
      }
      return EXPIRY_KEYS.map((key, i) => {
        const got = results?.[i];
        return {
          model: 'register' as const,
          key,
          input: { f: 'read' as const },
          output: got ? { value: got.value, revision: got.rev } : { value: null },
        };
      });
    },
  );
}

/** A final read of every expiring key from every instance (the faults are healed). */
export async function finalExpiryReads(ctx: WorkloadContext, kit: ClientKit): Promise<void> {
  for (const key of EXPIRY_KEYS) await readExpiring(ctx, kit, key);
}

/**
 * After the clients stopped: waits until the watchers have seen the sweeper's `expire` of every
 * key whose last event is an expiring set, or until `SWEEP_BOUND_MS` past the latest such expiry;
 * returns the moment it stopped waiting (the checker holds the feed to it).
 */
export async function awaitSweeps(recorder: Recorder): Promise<number> {
  for (;;) {
    const last = new Map<string, { kind: string; revision: number; expiresAt?: number }>();
    for (const watch of recorder.watches)
      for (const segment of watch.segments)
        for (const event of segment.events) {
          const before = last.get(event.key);
          if (before === undefined || before.revision < event.revision) last.set(event.key, event);
        }
    const pending = [...last.values()].filter((e) => e.kind === 'set' && e.expiresAt !== undefined).map((e) => e.expiresAt!);
    if (pending.length === 0 || now() > Math.max(...pending) + SWEEP_BOUND_MS) return now();
    await sleep(100);
  }
}
