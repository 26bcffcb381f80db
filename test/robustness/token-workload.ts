import type { CredentialHistory, MintedToken } from './history-credentials.js';
import type { Instance } from './instances.js';
import { bucketUrl, clientKit, keyUrl, pacedLoop } from './client-kit.js';
import { fromWall, now } from './recorder.js';
import { send } from './send.js';
import { type WorkloadContext, sleep } from './workload.js';

/**
 * Temporary tokens during the run: clients that mint a token for their own prefix (`t/<i>/`, read
 * and write, a TTL of 2 s: the server's whole-second `exp` leaves it 1 to 2 s), use it until it is
 * refused, now and then once more after that (it must stay refused), and mint another; and a
 * rotator that rotates the bucket's signing key every 2 to 3 s, revoking every token minted
 * before. Every use is recorded with its token for the credentials checker, and as a register
 * operation too (a refused write wrote nothing; a served one is in the linearizability check).
 */
export const TOKEN_PREFIX = 't/';
const TOKEN_TTL_SECONDS = 2;
/** docs/scale-out.md: another instance refuses a revoked token within 1 s, plus the time a request takes. */
const PROPAGATION_MS = 1000 + 500;

export function newCredentialHistory(): CredentialHistory {
  return { tokens: [], uses: [], rotations: [], propagationMs: PROPAGATION_MS };
}

/** Mints a token (anonymous: the suite's bucket has no secret_key); undefined when the mint was not answered 200. */
export async function mintToken(
  instance: Instance,
  bucket: string,
  prefix: string,
  permissions: string,
  ttl: number,
): Promise<{ token: string; claims: MintedToken } | undefined> {
  const ex = await send(`${bucketUrl(instance, bucket)}/tokens/`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: `prefix=${encodeURIComponent(prefix)}&permissions=${permissions}&ttl=${ttl}`,
  });
  if (ex.answer?.status !== 200) return undefined;
  const token = (JSON.parse(ex.answer.text) as { access_token: string }).access_token;
  const payload = JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString()) as { exp: number; gen: number };
  return { token, claims: { generation: payload.gen, expiresAt: fromWall(payload.exp * 1000), minted: now() } };
}

export async function tokenClient(ctx: WorkloadContext, index: number, credentials: CredentialHistory): Promise<void> {
  const state = { unanswered: false };
  const kit = clientKit(ctx, index, state);
  const { random, instance } = kit;
  const prefix = `${TOKEN_PREFIX}${index}/`;
  const key = `${prefix}k`;
  let held: { token: string; id: number; refused: boolean } | undefined;
  let n = 0;

  const use = async () => {
    const { token, id } = held!;
    const headers = { authorization: `Bearer ${token}` };
    const write = random.chance(0.5);
    const value = `k${kit.client}.${n++}`;
    const { ex, call, ret } = await kit.exchange(
      write ? 'token-write' : 'token-read',
      keyUrl(instance, ctx.bucket, key),
      write ? { method: 'PUT', headers: { ...headers, 'content-type': 'text/plain' }, body: value } : { headers },
      (answered, ok) => {
        const a = answered.answer;
        const revision = ok && a?.status === 200 ? Number(a.headers['kvb-revision']) : undefined;
        const output = write ? {} : { value: a?.status === 200 ? a.text : null };
        return [
          {
            model: 'register',
            key,
            input: write ? { f: 'write', value } : { f: 'read' },
            output: { ...output, ...(revision !== undefined && { revision }) },
          },
        ];
      },
      write ? [] : [404],
    );
    if (!(ex.error && !ex.error.sent)) {
      credentials.uses.push({
        token: id,
        client: kit.client,
        instance: instance.name,
        call,
        ret: ex.answer ? ret : Number.POSITIVE_INFINITY,
        ...(ex.answer && { status: ex.answer.status }),
      });
    }
    const status = ex.answer?.status;
    if (status !== 401 && status !== 403) return;
    // Refused: sometimes once more with the same token (it must stay refused), then a new one.
    if (held!.refused || !random.chance(0.5)) held = undefined;
    else held!.refused = true;
  };

  await pacedLoop(ctx, random, state, async () => {
    if (held === undefined) {
      const minted = await mintToken(instance, ctx.bucket, prefix, 'read,write', TOKEN_TTL_SECONDS);
      if (minted === undefined) {
        state.unanswered = true;
        return;
      }
      credentials.tokens.push(minted.claims);
      held = { token: minted.token, id: credentials.tokens.length - 1, refused: false };
    }
    // Once more after a refusal: far enough past it that the clocks' margin cannot excuse an acceptance.
    if (held.refused) await sleep(100);
    await use();
  });
}

/**
 * Rotates the signing key every 2 to 3 s, recording each generation it made and when it took
 * effect. A `PATCH` whose answer was lost may still take effect much later (its update waiting
 * behind a stopped instance's transaction on the bucket row), after the reads that followed it and
 * after later rotations were sent, so a generation the policy shows is not credited to the last
 * `PATCH`: each new generation is credited to the earliest `PATCH` not yet credited (they apply in
 * the order sent, one at a time from this one client), whose call is then a bound it cannot have
 * taken effect before, whichever of the outstanding ones made it.
 */
export async function rotator(ctx: WorkloadContext, credentials: CredentialHistory): Promise<void> {
  const instance = ctx.instances[0]!;
  const random = ctx.random.fork();
  // The bucket's signing key was set before the run (a generation already); rotations count from there.
  let generation = (await policyGeneration(instance, ctx.bucket))?.generation ?? 0;
  /** The calls of the rotations sent and not yet seen in the policy, oldest first. */
  const outstanding: number[] = [];
  let lastCall = Number.NEGATIVE_INFINITY;
  while (ctx.running()) {
    await sleep(random.int(2000, 3000));
    if (!ctx.running()) break;
    const call = now();
    lastCall = call;
    const ex = await send(bucketUrl(instance, ctx.bucket), {
      method: 'PATCH',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ signing_key: `sk-${random.int(0, 2 ** 31)}` }),
    });
    const answeredAt = now();
    const status = ex.answer?.status;
    // A refusal other than a 5xx wrote nothing: it makes no generation.
    if (status === undefined || status === 204 || status >= 500) outstanding.push(call);
    const seen = await policyGeneration(instance, ctx.bucket);
    if (seen === undefined || seen.generation <= generation) continue;
    // Took effect before this answer when it is the one rotation outstanding, else before the read that showed it.
    const only = status === 204 && outstanding.length === 1 && seen.generation === generation + 1;
    record(seen.generation, only ? answeredAt : seen.at);
  }
  // A rotation sent to a stopped instance may take effect after every read that followed it and
  // before the run ended: the faults are healed now, so this read shows it.
  if (outstanding.length === 0) return;
  const seen = await policyGeneration(instance, ctx.bucket);
  // Unread, it may have taken effect at any time after its call: the checker then excuses refusals after it.
  if (seen === undefined) record(generation + 1, Number.POSITIVE_INFINITY);
  else if (seen.generation > generation) record(seen.generation, seen.at);

  function record(seenGeneration: number, ret: number): void {
    for (let g = generation + 1; g <= seenGeneration; g++) {
      // Every generation is one of this client's rotations, so none is missing; were one, the latest call stands in.
      const call = outstanding.shift() ?? lastCall;
      credentials.rotations.push({ generation: g, instance: instance.name, call, ret });
    }
    generation = seenGeneration;
  }
}

/** The bucket's `signing_key_generation` and when the answer came, read within a few tries. */
async function policyGeneration(instance: Instance, bucket: string): Promise<{ generation: number; at: number } | undefined> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const ex = await send(bucketUrl(instance, bucket));
    if (ex.answer?.status === 200) {
      return { generation: (JSON.parse(ex.answer.text) as { signing_key_generation: number }).signing_key_generation, at: now() };
    }
    await sleep(250);
  }
  return undefined;
}
