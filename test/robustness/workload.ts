import type { Instance } from './instances.js';
import { type Recorder, now } from './recorder.js';
import type { Random } from './random.js';
import { type Answer, type Exchange, describe, outcomeOf, revisionOf, send } from './send.js';

/**
 * The register and counter clients: each has one request open at a time, on a few hot keys of one
 * bucket, and records every request as Ops (history.ts). Values are unique per write
 * (`w<client>.<n>`), so a read names the write it saw.
 */

export const REGISTERS = ['r/0', 'r/1', 'r/2', 'r/3', 'r/4'];
export const COUNTERS = ['c/0', 'c/1'];
const REGISTER_PREFIX = 'r/';

export interface WorkloadContext {
  bucket: string;
  /** The instances clients may use; a client sticks to `instances[index % length]`. */
  instances: Instance[];
  recorder: Recorder;
  running: () => boolean;
  random: Random;
  /** Each client's pace: at most this many requests per second (0: as fast as answers come). */
  ratePerClient: number;
}

/**
 * Waits in the robustness suite pace the load and the faults (its nemesis runs on the clock, as
 * etcd's does); no verdict depends on one: the checkers judge the recorded history.
 */
export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

const keyUrl = (instance: Instance, bucket: string, key: string) => `${instance.url}/api/v1/${bucket}/${encodeURIComponent(key)}`;
const bucketUrl = (instance: Instance, bucket: string) => `${instance.url}/api/v1/${bucket}`;
const jsonBody = (body: unknown) => ({ headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

interface TxnGet {
  key: string;
  type: string;
  value: string;
  rev: number;
}

/** Parses a 200 transaction answer (one with gets or a prefix delete). */
function txnResults(answer: Answer): { revision: number; results: Array<TxnGet | { deleted: number } | null> } | undefined {
  try {
    return JSON.parse(answer.text) as { revision: number; results: Array<TxnGet | { deleted: number } | null> };
  } catch {
    return undefined;
  }
}

/** One register/counter client, until `running()` turns false. */
export async function registerClient(ctx: WorkloadContext, index: number): Promise<void> {
  const { recorder, bucket } = ctx;
  const random = ctx.random.fork();
  const client = recorder.newClient();
  const instance = ctx.instances[index % ctx.instances.length]!;
  /** The revision this client last saw each register at (undefined: absent or never seen). */
  const seen = new Map<string, number | undefined>();
  /** Bucket revisions this client saw, for rollbacks to a recent past. */
  const revisions: number[] = [];
  let n = 0;
  /** The last request got no answer, or one that may or may not have applied (a 5xx). */
  let unanswered = false;
  const noteRevision = (rev: number | undefined) => {
    if (rev === undefined || !Number.isSafeInteger(rev)) return;
    revisions.push(rev);
    if (revisions.length > 50) revisions.shift();
  };

  /** Sends, records, tallies; returns the exchange and its outcome. `okStatuses` widen ok (a 404 read). */
  const exchange = async (
    kind: string,
    url: string,
    init: Parameters<typeof send>[1],
    build: (ex: Exchange, ok: boolean) => Parameters<Recorder['record']>[5],
    okStatuses: number[] = [],
  ) => {
    const call = now();
    const ex = await send(url, init);
    const ret = now();
    let outcome = outcomeOf(ex);
    if (ex.answer && okStatuses.includes(ex.answer.status)) outcome = 'ok';
    unanswered = ex.error !== undefined || outcome === 'unknown';
    // A request that never left (the connection was refused) had no effect and saw nothing: it has no place in the history.
    const drafts = build(ex, outcome === 'ok');
    if (!(ex.error && !ex.error.sent)) recorder.record(client, instance.name, call, ret, outcome, drafts, ex.answer?.status);
    recorder.count(kind, outcome, describe(ex));
    return { ex, outcome };
  };

  const read = async (key: string) => {
    const counter = COUNTERS.includes(key);
    await exchange(
      counter ? 'counter-read' : 'read',
      keyUrl(instance, bucket, key),
      {},
      (ex, ok) => {
        const a = ex.answer;
        const found = a?.status === 200;
        const revision = found ? revisionOf(a) : undefined;
        if (ok && !counter) seen.set(key, revision);
        if (ok) noteRevision(revision);
        return counter
          ? [
              {
                model: 'counter',
                key,
                input: { f: 'read' },
                output: { value: found ? Number(a.text) : 0, ...(revision !== undefined && { revision }) },
              },
            ]
          : [
              {
                model: 'register',
                key,
                input: { f: 'read' },
                output: { value: found ? a.text : null, ...(revision !== undefined && { revision }) },
              },
            ];
      },
      [404],
    );
  };

  const write = async (key: string, mode: 'write' | 'cas' | 'create') => {
    const value = `w${client}.${n++}`;
    const headers: Record<string, string> = { 'content-type': 'text/plain' };
    const rev = seen.get(key);
    if (mode === 'cas') {
      if (rev === undefined) return read(key);
      // Now and then a revision that is surely stale, so 412s are exercised as much as 200s.
      headers['if-match'] = `"${random.chance(0.1) ? Math.max(1, rev - 1) : rev}"`;
    }
    if (mode === 'create') headers['if-none-match'] = '*';
    const ifMatch = headers['if-match'] ? Number(headers['if-match'].slice(1, -1)) : 0;
    await exchange(mode, keyUrl(instance, bucket, key), { method: 'PUT', headers, body: value }, (ex, ok) => {
      const revision = ok ? revisionOf(ex.answer!) : undefined;
      if (ok) {
        seen.set(key, revision);
        noteRevision(revision);
      } else if (ex.answer?.status === 412) {
        // The 412 names the key's current revision when it is live: use it for the next CAS.
        const etag = ex.answer.headers.etag;
        seen.set(key, typeof etag === 'string' ? Number(etag.replace(/"/g, '')) : undefined);
      }
      const input =
        mode === 'write'
          ? { f: 'write' as const, value }
          : mode === 'cas'
            ? { f: 'cas' as const, rev: ifMatch, value }
            : { f: 'create' as const, value };
      return [{ model: 'register', key, input, output: { ...(revision !== undefined && { revision }) } }];
    });
  };

  const remove = async (key: string) => {
    await exchange('delete', keyUrl(instance, bucket, key), { method: 'DELETE' }, (ex, ok) => {
      const revision = ok ? revisionOf(ex.answer!) : undefined;
      if (ok) {
        seen.set(key, undefined);
        noteRevision(revision);
      }
      return [{ model: 'register', key, input: { f: 'delete' }, output: { ...(revision !== undefined && { revision }) } }];
    });
  };

  const add = async (key: string) => {
    const delta = random.int(1, 3);
    await exchange('counter-add', keyUrl(instance, bucket, key), { method: 'PATCH', body: `+${delta}` }, (ex, ok) => {
      const revision = ok ? revisionOf(ex.answer!) : undefined;
      if (ok) noteRevision(revision);
      return [
        {
          model: 'counter',
          key,
          input: { f: 'add', delta },
          output: ok ? { value: Number(ex.answer!.text), ...(revision !== undefined && { revision }) } : {},
        },
      ];
    });
  };

  /** A consistent multi-read: gets of two registers and a counter in one transaction. */
  const multiRead = async () => {
    const keys = [...random.sample(REGISTERS, 2), random.pick(COUNTERS)];
    await exchange(
      'txn-read',
      bucketUrl(instance, bucket),
      { method: 'POST', ...jsonBody({ txn: keys.map((key) => ({ get: key })) }) },
      (ex, ok) => {
        const parsed = ok ? txnResults(ex.answer!) : undefined;
        if (ok && !parsed) throw new Error(`a transaction of gets answered 2xx without results: ${ex.answer!.text.slice(0, 200)}`);
        return keys.map((key, i) => {
          const got = parsed?.results[i] as TxnGet | null | undefined;
          if (COUNTERS.includes(key)) {
            return {
              model: 'counter' as const,
              key,
              input: { f: 'read' as const },
              output: got ? { value: Number(got.value), revision: got.rev } : { value: 0 },
            };
          }
          if (parsed) seen.set(key, got?.rev);
          return {
            model: 'register' as const,
            key,
            input: { f: 'read' as const },
            output: got ? { value: got.value, revision: got.rev } : { value: null },
          };
        });
      },
    );
  };

  /** A transaction with a check: compare-and-set of one register and a blind write of another. */
  const checkedTxn = async () => {
    const [a, b] = random.sample(REGISTERS, 2) as [string, string];
    const rev = seen.get(a);
    const va = `w${client}.${n++}`;
    const vb = `w${client}.${n++}`;
    const check = rev === undefined ? { check: a, exists: false } : { check: a, rev };
    const body = { txn: [check, { set: a, value: va }, { set: b, value: vb }] };
    await exchange('txn-cas', bucketUrl(instance, bucket), { method: 'POST', ...jsonBody(body) }, (ex, ok) => {
      const revision = ok ? revisionOf(ex.answer!) : undefined;
      if (ok) {
        seen.set(a, revision);
        seen.set(b, revision);
        noteRevision(revision);
      } else if (ex.answer?.status === 409) {
        seen.delete(a);
      }
      const output = { ...(revision !== undefined && { revision }) };
      return [
        { model: 'register', key: a, input: rev === undefined ? { f: 'create', value: va } : { f: 'cas', rev, value: va }, output },
        { model: 'register', key: b, input: { f: 'write', value: vb }, output },
      ];
    });
  };

  /**
   * A prefix delete of every register, with a get of each in the same transaction: a get sees the
   * bucket before the transaction's writes, so it says which keys the delete removed (a delete)
   * and which were already absent (a read of absent).
   */
  const prefixDelete = async () => {
    const txn = [...REGISTERS.map((key) => ({ get: key })), { delete_prefix: REGISTER_PREFIX }];
    await exchange('prefix-delete', bucketUrl(instance, bucket), { method: 'POST', ...jsonBody({ txn }) }, (ex, ok) => {
      const parsed = ok ? txnResults(ex.answer!) : undefined;
      if (ok && !parsed) throw new Error(`a prefix delete answered 2xx without results: ${ex.answer!.text.slice(0, 200)}`);
      if (parsed) noteRevision(parsed.revision);
      return REGISTERS.map((key, i) => {
        if (!parsed) return { model: 'register' as const, key, input: { f: 'delete' as const } };
        seen.set(key, undefined);
        return parsed.results[i]
          ? { model: 'register' as const, key, input: { f: 'delete' as const }, output: { revision: parsed.revision } }
          : { model: 'register' as const, key, input: { f: 'read' as const }, output: { value: null } };
      });
    });
  };

  /**
   * A rollback of the registers to a revision this client saw. Its answer names the keys it
   * changed and how (set or delete), not the values; the values come from a listing at that
   * revision read first (history at a past revision never changes), so each key's new state is
   * known: a changed key is a write of its value then (or a delete), an unchanged one already held it.
   */
  const rollback = async () => {
    if (revisions.length < 5) return read(random.pick(REGISTERS));
    const target = revisions[random.int(0, revisions.length - 5)]!;
    const plan = await send(`${bucketUrl(instance, bucket)}/?prefix=${REGISTER_PREFIX}&rev=${target}&values=true&format=json`);
    if (plan.answer?.status !== 200) {
      recorder.count('rollback-plan', outcomeOf(plan) === 'ok' ? 'fail' : outcomeOf(plan), describe(plan));
      return;
    }
    const then = new Map((JSON.parse(plan.answer.text) as Array<[string, string]>).map(([k, v]) => [k, v]));
    await exchange(
      'rollback',
      `${bucketUrl(instance, bucket)}?rollback=${target}&prefix=${REGISTER_PREFIX}`,
      { method: 'POST' },
      (ex, ok) => {
        let changes: Map<string, 'set' | 'delete'> | undefined;
        let revision: number | undefined;
        if (ok) {
          const body = JSON.parse(ex.answer!.text) as { revision: number; changes: Array<{ key: string; action: 'set' | 'delete' }> };
          changes = new Map(body.changes.map((c) => [c.key, c.action]));
          revision = body.revision;
          if (changes.size > 0) noteRevision(revision);
        }
        return REGISTERS.map((key) => {
          const value = then.get(key);
          const write = value === undefined ? { f: 'delete' as const } : { f: 'write' as const, value };
          if (!changes) return { model: 'register' as const, key, input: write };
          seen.delete(key);
          const action = changes.get(key);
          if (action === undefined)
            return { model: 'register' as const, key, input: { f: 'read' as const }, output: { value: value ?? null } };
          if ((action === 'delete') !== (value === undefined)) {
            throw new Error(
              `rollback to ${target}: ${key} was ${value === undefined ? 'absent' : `"${value}"`} then, yet the rollback did ${action}`,
            );
          }
          return { model: 'register' as const, key, input: write, output: { revision } };
        });
      },
    );
  };

  const minGapMs = ctx.ratePerClient > 0 ? 1000 / ctx.ratePerClient : 0;
  while (ctx.running()) {
    const started = now();
    const roll = random.next();
    unanswered = false;
    if (roll < 0.28) await read(random.pick(REGISTERS));
    else if (roll < 0.4) await write(random.pick(REGISTERS), 'write');
    else if (roll < 0.55) await write(random.pick(REGISTERS), 'cas');
    else if (roll < 0.6) await write(random.pick(REGISTERS), 'create');
    else if (roll < 0.65) await remove(random.pick(REGISTERS));
    else if (roll < 0.75) await add(random.pick(COUNTERS));
    else if (roll < 0.8) await read(random.pick(COUNTERS));
    else if (roll < 0.87) await multiRead();
    else if (roll < 0.97) await checkedTxn();
    else if (roll < 0.985) await prefixDelete();
    else await rollback();
    // After a request with no answer, back off a little: the instance is paused, dead or failing over.
    const backoff = unanswered ? 100 + random.int(0, 100) : 0;
    const wait = Math.max(backoff, minGapMs - (now() - started));
    if (wait > 0) await sleep(wait);
  }
}

/**
 * After the run (faults healed): one read of every key, so a lost acknowledged write shows up as a
 * read that contradicts it. Retried until answered, within a bound.
 */
export async function finalReads(ctx: WorkloadContext, errors: string[]): Promise<void> {
  const client = ctx.recorder.newClient();
  for (const instance of ctx.instances) {
    for (const key of [...REGISTERS, ...COUNTERS]) {
      const counter = COUNTERS.includes(key);
      for (let attempt = 0; ; attempt++) {
        if (attempt === 20) {
          // Every instance must serve again once the faults are healed, without a restart of ours.
          errors.push(`instance ${instance.name} did not answer a read of ${key} in 20 tries after the faults were healed`);
          break;
        }
        const call = now();
        const ex = await send(keyUrl(instance, ctx.bucket, key));
        const ret = now();
        const a = ex.answer;
        if (a?.status === 200 || a?.status === 404) {
          const found = a.status === 200;
          const revision = found ? revisionOf(a) : undefined;
          ctx.recorder.record(
            client,
            instance.name,
            call,
            ret,
            'ok',
            [
              counter
                ? {
                    model: 'counter',
                    key,
                    input: { f: 'read' },
                    output: { value: found ? Number(a.text) : 0, ...(revision !== undefined && { revision }) },
                  }
                : {
                    model: 'register',
                    key,
                    input: { f: 'read' },
                    output: { value: found ? a.text : null, ...(revision !== undefined && { revision }) },
                  },
            ],
            a.status,
          );
          ctx.recorder.count('final-read', 'ok');
          break;
        }
        // A read changes nothing: an unanswered one need not be recorded to keep the history honest.
        ctx.recorder.count('final-read', outcomeOf(ex), describe(ex));
        await sleep(250);
      }
    }
  }
}
