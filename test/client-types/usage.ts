// Compiled by test/unit/client-types.test.ts with tsc --noEmit: how an app uses `kvb/client`.
import { type Entry, type KvbBucket, PreconditionFailedError, type WatchEvent, connect, connectFromEnv, createBucket } from 'kvb/client';

export async function usage(): Promise<void> {
  const id: string = await createBucket({ url: 'http://127.0.0.1:8080' }, { email: 'me@example.com', secret_key: 'S' });
  const kv: KvbBucket = connect({ url: 'http://127.0.0.1:8080', bucket: id, token: 'S', timeoutMs: 5000, retries: 3 });
  const fromEnv: KvbBucket = connectFromEnv();
  void fromEnv;

  const written: Entry<bigint> = await kv.set('visits', 9223372036854775807n, { ttl: 60, ifAbsent: true });
  const revision: number = written.revision;
  await kv.set('config', { theme: 'dark' }, { ifRevision: revision, type: 'json' });
  const read = await kv.get<{ theme: string }>('config', { signal: AbortSignal.timeout(1000) });
  const theme: string | undefined = read?.value.theme;
  void theme;
  const counter = await kv.increment('visits', 1n);
  const n: bigint | number = counter.value;
  void n;
  await kv.delete('config', { ifRevision: revision });

  for await (const { key } of kv.list({ prefix: 'user/' })) void key;
  for await (const entry of kv.list({ prefix: 'user/', values: true, reverse: true })) {
    const size: number = entry.size;
    void size;
  }

  const result = await kv.atomic().check('a', 4).check('b', null).set('a', 'x', { ttl: 10 }).delete('b').commit();
  if (result.ok) {
    const committed: number = result.revision;
    void committed;
  } else {
    const failed: string[] = result.failedChecks.map((c) => c.key);
    void failed;
  }

  await kv.update('doc', (current) => ({ n: ((current as { n: number } | undefined)?.n ?? 0) + 1 }), { retries: 20 });

  for await (const event of kv.watch({ prefix: 'config/', since: 10, values: true })) {
    const e: WatchEvent = event;
    if (e.type === 'set') void e.value;
  }

  const exported: AsyncIterable<Uint8Array> = await kv.export({ prefix: 'user/' });
  const imported = await kv.import(exported, { mode: 'replace', prefix: 'user/' });
  void imported.revision;
  const token: string = await kv.mintToken({ prefix: 'user/', permissions: ['read', 'enumerate'], ttl: 600 });
  void token;
  const policy = await kv.policy();
  void policy.has_signing_key;
  await kv.updatePolicy({ read_key: null, default_ttl: 3600 });
  await kv.deleteBucket();

  try {
    await kv.set('k', 'v', { ifRevision: 1 });
  } catch (err) {
    if (err instanceof PreconditionFailedError) void err.currentRevision;
  }
}
