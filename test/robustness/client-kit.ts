import type { Instance } from './instances.js';
import type { Random } from './random.js';
import { type Recorder, now } from './recorder.js';
import { type Exchange, describe, outcomeOf, send } from './send.js';
import { type WorkloadContext, sleep } from './workload.js';

/**
 * What the extra clients (expiring keys, typed values, temporary tokens) share: one request open at
 * a time on one instance, each recorded as Ops the way the register clients record theirs
 * (workload.ts), and a loop paced at the run's rate that backs off after an unanswered request.
 */
export type Drafts = Parameters<Recorder['record']>[5];

export interface ClientKit {
  readonly client: number;
  readonly instance: Instance;
  readonly random: Random;
  /** Sends, records (unless it never left), tallies; `okStatuses` widen ok (a 404 read). */
  exchange(
    kind: string,
    url: string,
    init: Parameters<typeof send>[1],
    build: (ex: Exchange, ok: boolean) => Drafts,
    okStatuses?: number[],
  ): Promise<{ ex: Exchange; outcome: ReturnType<typeof outcomeOf>; call: number; ret: number }>;
}

export function clientKit(ctx: WorkloadContext, index: number, state: { unanswered: boolean }): ClientKit {
  const client = ctx.recorder.newClient();
  const instance = ctx.instances[index % ctx.instances.length]!;
  return {
    client,
    instance,
    random: ctx.random.fork(),
    async exchange(kind, url, init, build, okStatuses = []) {
      const call = now();
      const ex = await send(url, init);
      const ret = now();
      let outcome = outcomeOf(ex);
      if (ex.answer && okStatuses.includes(ex.answer.status)) outcome = 'ok';
      state.unanswered = ex.error !== undefined || outcome === 'unknown';
      const drafts = build(ex, outcome === 'ok');
      // A request that never left (the connection was refused) had no effect and saw nothing.
      if (!(ex.error && !ex.error.sent)) ctx.recorder.record(client, instance.name, call, ret, outcome, drafts, ex.answer?.status);
      ctx.recorder.count(kind, outcome, describe(ex));
      return { ex, outcome, call, ret };
    },
  };
}

/** Runs `step` until the run stops, at most `ctx.ratePerClient` times a second, backing off after an unanswered request. */
export async function pacedLoop(
  ctx: WorkloadContext,
  random: Random,
  state: { unanswered: boolean },
  step: () => Promise<void>,
): Promise<void> {
  const minGapMs = ctx.ratePerClient > 0 ? 1000 / ctx.ratePerClient : 0;
  while (ctx.running()) {
    const started = now();
    state.unanswered = false;
    await step();
    const backoff = state.unanswered ? 100 + random.int(0, 100) : 0;
    const wait = Math.max(backoff, minGapMs - (now() - started));
    if (wait > 0) await sleep(wait);
  }
}

export const keyUrl = (instance: Instance, bucket: string, key: string) => `${instance.url}/api/v1/${bucket}/${encodeURIComponent(key)}`;
export const bucketUrl = (instance: Instance, bucket: string) => `${instance.url}/api/v1/${bucket}`;
export const jsonBody = (body: unknown) => ({ headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
