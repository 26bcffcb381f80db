import { now } from './recorder.js';
import { describe, outcomeOf, revisionOf, send } from './send.js';
import { type WorkloadContext, sleep } from './workload.js';

/**
 * Lock holders with fencing tokens, over plain HTTP the way `kv.lock()` works: take the lock key
 * create-only with a short TTL (its revision then is the fencing token), renew it by
 * compare-and-set, and write only in transactions that check `{"check": LOCK, "created": token}`
 * (the lock is live and was created at that revision). Now and then a holder stops renewing for
 * longer than the TTL (a client-side pause, as a GC pause or SIGSTOP would), so another takes the
 * lock, and then writes again under its old token: that write must be refused. Every fenced write
 * is recorded for the fencing checker (tokens of committed writes never go back).
 */

export const LOCK_KEY = 'lock/leader';
const FENCED_KEY = 'fenced/log';
const TTL_SECONDS = 1;

const txn = (body: unknown[]) => ({ method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ txn: body }) });

export async function lockHolder(ctx: WorkloadContext, index: number, errors: string[]): Promise<void> {
  const { recorder, bucket } = ctx;
  const random = ctx.random.fork();
  const holder = recorder.newClient();
  const instance = ctx.instances[index % ctx.instances.length]!;
  const base = `${instance.url}/api/v1/${bucket}`;
  const lockUrl = `${base}/${encodeURIComponent(LOCK_KEY)}?ttl=${TTL_SECONDS}`;
  let n = 0;

  /** One fenced write; false when the lock is no longer ours (or the answer is unknown). */
  const fencedWrite = async (token: number): Promise<boolean> => {
    const call = now();
    const ex = await send(
      base,
      txn([
        { check: LOCK_KEY, created: token },
        { set: FENCED_KEY, value: `h${holder}.${n++}` },
      ]),
    );
    const ret = now();
    const outcome = outcomeOf(ex);
    recorder.count('fenced-write', outcome, describe(ex));
    if (ex.error && !ex.error.sent) return false;
    if (ex.answer?.status === 400) {
      // A server without the `created` check: the workload cannot run, and must not pass as if it had.
      errors.push(
        `lock holder ${holder}: a fenced transaction was refused as malformed (does this server know {"check","created"}?): ${ex.answer.text.slice(0, 200)}`,
      );
      return false;
    }
    const revision = outcome === 'ok' ? revisionOf(ex.answer!) : undefined;
    recorder.fenced.push({
      holder,
      token,
      ...(revision !== undefined && { revision }),
      outcome,
      call,
      ret: outcome === 'unknown' ? Infinity : ret,
    });
    return outcome === 'ok';
  };

  while (ctx.running() && errors.length === 0) {
    // Acquire: create-only, so at most one live holder; an expired lock counts as absent.
    const taken = await send(lockUrl, {
      method: 'PUT',
      headers: { 'content-type': 'text/plain', 'if-none-match': '*' },
      body: `h${holder}`,
    });
    recorder.count('lock-acquire', outcomeOf(taken), describe(taken));
    if (taken.answer?.status !== 200) {
      await sleep(random.int(50, 200));
      continue;
    }
    const token = revisionOf(taken.answer)!;
    let rev = token;
    const heldUntil = now() + random.int(500, 2000);
    let held = true;
    while (held && ctx.running() && now() < heldUntil) {
      held = await fencedWrite(token);
      if (!held) break;
      // Renew (keeps the create revision, so the token stays valid while renewed in time).
      const renewed = await send(lockUrl, {
        method: 'PUT',
        headers: { 'content-type': 'text/plain', 'if-match': `"${rev}"` },
        body: `h${holder}`,
      });
      recorder.count('lock-renew', outcomeOf(renewed), describe(renewed));
      if (renewed.answer?.status !== 200) break;
      rev = revisionOf(renewed.answer)!;
      await sleep(random.int(50, 150));
    }
    if (held && random.chance(0.4)) {
      // Stop renewing past the TTL: another holder may take the lock; then write under the old token anyway.
      await sleep(TTL_SECONDS * 1000 + random.int(300, 1200));
      await fencedWrite(token);
    } else if (held) {
      const released = await send(`${base}/${encodeURIComponent(LOCK_KEY)}`, { method: 'DELETE', headers: { 'if-match': `"${rev}"` } });
      recorder.count('lock-release', outcomeOf(released), describe(released));
    }
    await sleep(random.int(20, 100));
  }
}
