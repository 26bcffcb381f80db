import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GoneError, connect, createBucket } from '../../src/client/index.js';
import { TEST_BACKEND } from '../helpers/backend.js';
import { type AppServer, startAppServer } from '../helpers/app-server.js';

/** `kvb/client`'s history methods against a spawned server (sqlite, postgres and pgbouncer projects). */
let server: AppServer;
const SECRET = 'history-client-secret';

beforeAll(async () => {
  server = await startAppServer();
});
afterAll(async () => {
  await server?.stop();
});

describe(`kvb/client history (${TEST_BACKEND})`, () => {
  it("changeLog(): the bucket's changes in revision order, by actor, prefix and revision or time range", async () => {
    const id = await createBucket(
      { url: server.url },
      { email: 'h@example.com', secret_key: SECRET, signing_key: 'log-sign', default_ttl: 0 },
    );
    const kv = connect({ url: server.url, bucket: id, token: SECRET });
    const first = await kv.set('app/a', 'one');
    const tokenKv = connect({
      url: server.url,
      bucket: id,
      token: await kv.mintToken({ prefix: 'app/', permissions: ['read', 'write'], ttl: 600 }),
    });
    await tokenKv.set('app/b', 7n);
    await tokenKv.atomic().set('app/d', 'd').set('app/c', 'c').commit();
    await kv.set('cfg/x', { on: true });

    const all = await kv.changeLog({ values: true });
    expect(all.map((c) => [c.key, c.operation, c.actor?.kind, c.value])).toEqual([
      ['app/a', 'set', 'secret', 'one'],
      ['app/b', 'set', 'token', 7n],
      ['app/c', 'transaction', 'token', 'c'],
      ['app/d', 'transaction', 'token', 'd'],
      ['cfg/x', 'set', 'secret', { on: true }],
    ]);
    const tokenId = all[1]!.actor!.tokenId!;
    expect((await kv.changeLog({ actor: `token:${tokenId}` })).map((c) => c.key)).toEqual(['app/b', 'app/c', 'app/d']);
    expect((await kv.changeLog({ prefix: 'cfg/' })).map((c) => c.key)).toEqual(['cfg/x']);
    expect((await kv.changeLog({ since: first.revision, until: all[2]!.revision })).map((c) => c.key)).toEqual(['app/b', 'app/c', 'app/d']);
    expect((await kv.changeLog({ since: all[4]!.time })).map((c) => c.key)).toEqual(
      all.filter((c) => c.time >= all[4]!.time).map((c) => c.key),
    );
    expect((await kv.changeLog({ limit: 3 })).map((c) => c.key)).toEqual(['app/a', 'app/b', 'app/c']);
    await expect(tokenKv.changeLog()).rejects.toMatchObject({ status: 403 });
  });

  it('get({revision}), list({revision}), history(key) and rollback(revision, {prefix})', async () => {
    const id = await createBucket({ url: server.url }, { email: 'h@example.com', secret_key: SECRET, default_ttl: 0 });
    const kv = connect({ url: server.url, bucket: id, token: SECRET });
    const first = await kv.set('app/mode', 'blue');
    await kv.set('app/limit', 10n);
    const good = (await kv.increment('app/limit', 5n)).revision;
    await kv.set('app/mode', { colour: 'red' });
    await kv.delete('app/limit');
    await kv.set('other', 'x');

    expect((await kv.get('app/mode', { revision: first.revision }))?.value).toBe('blue');
    expect(await kv.get('app/limit', { revision: first.revision })).toBeNull();
    expect((await kv.get('app/limit', { revision: good }))?.value).toBe(15n);
    const then: Array<[string, unknown]> = [];
    for await (const entry of kv.list({ values: true, revision: good })) then.push([entry.key, entry.value]);
    expect(then).toEqual([
      ['app/limit', 15n],
      ['app/mode', 'blue'],
    ]);

    const history = await kv.history('app/mode', { values: true });
    expect(history.map((h) => [h.operation, h.value])).toEqual([
      ['set', { colour: 'red' }],
      ['set', 'blue'],
    ]);
    expect(history[0]!.time).toBeInstanceOf(Date);
    expect((await kv.history('app/limit')).map((h) => h.operation)).toEqual(['delete', 'counter', 'set']);

    const dry = await kv.rollback(good, { prefix: 'app/', dryRun: true });
    expect(dry.changed).toBe(2);
    const done = await kv.rollback(good, { prefix: 'app/' });
    expect(done.revision).toBe(dry.revision + 1);
    expect((await kv.get('app/mode'))?.value).toBe('blue');
    expect((await kv.get('app/limit'))?.value).toBe(15n);
    expect((await kv.get('other'))?.value).toBe('x');
    expect((await kv.history('app/mode', { limit: 1 }))[0]!.operation).toBe('rollback');
  });

  it('a revision older than the history is a GoneError that names the floor', { timeout: 60_000 }, async () => {
    // History bounded to one byte and compacted every second: the floor soon rises to the bucket's revision.
    const bounded = await startAppServer({ config: { maxHistoryBytesPerBucket: 1, sweepIntervalSeconds: 1 } });
    try {
      const id = await createBucket({ url: bounded.url }, { email: 'h@example.com', secret_key: SECRET, default_ttl: 0 });
      const kv = connect({ url: bounded.url, bucket: id, token: SECRET });
      await kv.set('k', 'old');
      const { revision } = await kv.set('k', 'v');
      await expect
        .poll(async () => (await kv.get('k', { revision: revision - 1 }).catch((e: unknown) => e)) instanceof GoneError, {
          timeout: 20_000,
        })
        .toBe(true);
      const err = await kv.get('k', { revision: revision - 1 }).catch((e: unknown) => e);
      expect((err as GoneError).status).toBe(410);
      expect((err as GoneError).floor).toBe(revision);
      expect((await kv.get('k', { revision }))?.value).toBe('v');
    } finally {
      await bounded.stop();
    }
  });
});
