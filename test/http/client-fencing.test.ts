import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FetchLike, type KvbBucket, type Lock, connect, createBucket } from '../../src/client/index.js';
import { type AppServer, startAppServer } from '../helpers/app-server.js';

/**
 * The typed client's fencing tokens (`kvb/client`'s lock token and `atomic().fence()`) against a
 * spawned server, run by the sqlite, postgres and pgbouncer projects alike. A paused holder is a
 * client whose requests stop getting through; every wait is for an event (a lock acquired, a
 * lock lost, a renewal seen), never for a length of time.
 */
let server: AppServer;
const SECRET = 'fencing-secret';

beforeAll(async () => {
  server = await startAppServer();
});
afterAll(async () => {
  await server?.stop();
});

async function newBucket(): Promise<string> {
  return createBucket({ url: server.url }, { email: 'fence@example.com', secret_key: SECRET, default_ttl: 0 });
}

const client = (bucket: string, extra: Partial<Parameters<typeof connect>[0]> = {}): KvbBucket =>
  connect({ url: server.url, bucket, token: SECRET, ...extra });

/** The key's create revision, as the server answers it when asked. */
const createRevisionOf = async (kv: KvbBucket, key: string) => (await kv.http.get(kv.id, key, { createRevision: true })).createRevision;

const lostEvent = (lock: Lock) =>
  new Promise<void>((resolve) => (lock.lost.aborted ? resolve() : lock.lost.addEventListener('abort', () => resolve(), { once: true })));

describe('lock tokens and fenced writes', () => {
  it("the token is the lock key's create revision; it stays the same across renewals, and a fenced write commits", async () => {
    const kv = client(await newBucket());
    const lock = await kv.lock('fence/renewed', { ttl: 3 });
    const acquired = (await kv.get('fence/renewed'))!.revision;
    expect(lock.token).toBe(acquired);
    expect(await createRevisionOf(kv, 'fence/renewed')).toBe(lock.token);
    // The event: a renewal (every TTL/3) has moved the key's revision.
    await expect.poll(async () => (await kv.get('fence/renewed'))!.revision, { timeout: 15_000, interval: 100 }).toBeGreaterThan(acquired);
    expect(lock.token).toBe(acquired);
    expect(await createRevisionOf(kv, 'fence/renewed')).toBe(lock.token);
    expect(await kv.atomic().fence(lock).set('fence/out', 'written').commit()).toMatchObject({ ok: true });
    expect((await kv.get('fence/out'))?.value).toBe('written');
    await lock.release();
  });

  it("a holder paused past its TTL, whose lock another has taken, is refused; the new holder's fenced write commits", async () => {
    const bucket = await newBucket();
    let paused = false;
    // A paused process: its requests (renewals included) get nowhere until it resumes.
    const pausable: FetchLike = (url, init) =>
      paused
        ? new Promise((_, reject) => init.signal?.addEventListener('abort', () => reject(init.signal?.reason), { once: true }))
        : fetch(url, init as RequestInit);
    const first = client(bucket, { fetch: pausable, timeoutMs: 2000 });
    const second = client(bucket);

    const a = await first.lock('fence/lock', { ttl: 1 });
    expect(await first.atomic().fence(a).set('fence/work', 'by a').commit()).toMatchObject({ ok: true });
    paused = true;
    const b = await second.lock('fence/lock', { ttl: 30 });
    await lostEvent(a);
    expect(b.token).toBeGreaterThan(a.token);
    expect(await createRevisionOf(second, 'fence/lock')).toBe(b.token);

    paused = false;
    // A resumes, still believing what it believed: its fenced write must not land.
    const stale = await first.atomic().fence(a).set('fence/work', 'by a, stale').commit();
    expect(stale).toEqual({ ok: false, failedChecks: [{ index: 0, key: 'fence/lock' }] });
    expect((await second.get('fence/work'))?.value).toBe('by a');
    expect(await second.atomic().fence(b).set('fence/work', 'by b').commit()).toMatchObject({ ok: true });
    // The same check spelled out, as the robustness suite and other languages send it.
    expect(await second.atomic().checkCreated('fence/lock', a.token).set('fence/work', 'stale again').commit()).toMatchObject({
      ok: false,
    });
    expect((await second.get('fence/work'))?.value).toBe('by b');
    await b.release();
    await a.release();
  });

  it("an acquire whose answer was lost and retried finds its own write, with that write's token", async () => {
    const bucket = await newBucket();
    let written: number | undefined;
    // The first acquiring PUT reaches the server, but its answer is lost: the client sees a 503 and retries.
    const losesFirstAnswer: FetchLike = async (url, init) => {
      const response = await fetch(url, init as RequestInit);
      if (written === undefined && init.method === 'PUT' && init.headers['if-none-match'] === '*') {
        expect(response.status).toBe(200);
        written = Number(response.headers.get('kvb-revision'));
        return new Response(JSON.stringify({ error: { code: 503, message: 'service_unavailable', detail: 'answer lost' } }), {
          status: 503,
          headers: { 'retry-after': '0', 'content-type': 'application/json' },
        });
      }
      return response;
    };
    const kv = client(bucket, { fetch: losesFirstAnswer });
    // Another write first, so the token cannot equal 1 by chance.
    await client(bucket).set('other', 'x');
    const lock = await kv.lock('fence/retried', { ttl: 30 });
    expect(written).toBeGreaterThan(1);
    expect(lock.token).toBe(written);
    expect(await kv.atomic().fence(lock).set('fence/retried-out', 'ok').commit()).toMatchObject({ ok: true });
    await lock.release();
  });
});
