// kvb/client as an app uses it, in whichever runtime runs this file (Node, Deno, Bun): it imports
// the built package (KVB_CLIENT_MODULE: `kvb-client` as installed from its tarball, or by default
// the workspace's packages/client build), talks to the server named by KVB_URL, and prints one
// JSON object describing what it saw. test/runtimes/client-runtimes.test.ts and
// test/packaging/client-package.test.ts run it under each runtime and expect the same object from
// all of them (test/helpers/client-scenario.ts). Plain JavaScript, no runtime-specific API, except
// reading the environment (through connectFromEnv, which knows process.env and Deno.env).
const env = globalThis.process?.env ?? globalThis.Deno?.env.toObject() ?? {};
const { KvbNetworkError, NotFoundError, PreconditionFailedError, connect, connectFromEnv, createBucket } = await import(
  env.KVB_CLIENT_MODULE ?? '../../packages/client/dist/client/index.js'
);
const url = env.KVB_URL;
const bucket = await createBucket({ url }, { email: 'runtime@example.com', secret_key: 'S', default_ttl: 0 });
const kv = connectFromEnv({ ...env, KVB_BUCKET: bucket, KVB_TOKEN: 'S' });

const max = await kv.set('max', 9223372036854775807n);
const bytes = Uint8Array.from({ length: 256 }, (_, i) => i);
await kv.set('bytes', bytes);
await kv.set('doc', { hello: 'world' });
await kv.set('float', 1.5);
await kv.set('text', 'héllo');
const readMax = await kv.get('max');
const readBytes = await kv.get('bytes');
const count = await kv.increment('visits', 2n);
const stale = await kv.set('max', 1n, { ifRevision: max.revision - 1 }).catch((e) => e);
const keys = [];
for await (const { key } of kv.list({ pageSize: 2 })) keys.push(key);
const listed = [];
for await (const e of kv.list({ values: true, prefix: 'f' })) listed.push(`${e.key}=${e.value}:${e.type}`);
const updated = await kv.update('visits', (n) => n + 1n);
// One number rule with the CLI and the server: 90 is int64; a value's exact text is kept.
const ninety = await kv.set('ninety', 90);
const three = await kv.set('three', 3, { type: 'float64' });

// Consistent multi-read, expiry change, prefix delete.
const many = await kv.getMany(['max', 'text', 'none']);
const expired = await kv.expire('text', 600);
const text = await kv.get('text');
const persisted = await kv.expire('text', 0);
const notLive = await kv.expire('none', 5);
await kv.atomic().set('tmp/1', 1).set('tmp/2', 2).set('tmp/3', 3).commit();
const pruned = await kv.deletePrefix('tmp/');

// The watch feed: a change made after it starts arrives with its revision.
const controller = new AbortController();
const seen = (async () => {
  for await (const event of kv.watch({ prefix: 'w/', signal: controller.signal })) {
    if (event.key === 'w/done') return `${event.type} ${event.key} ${typeof event.revision}`;
  }
})().catch((e) => `error ${e}`);
// The feed is live once its first request is answered; writing until it reports keeps this free of timing.
let watched;
for (let i = 0; watched === undefined; i++) {
  await kv.set('w/done', i);
  watched = await Promise.race([seen, new Promise((resolve) => setTimeout(resolve, 200))]);
}
controller.abort();

// A lock: held, then free again after release.
const lock = await kv.lock('lock/runtime', { ttl: 5 });
const lockValue = (await kv.get('lock/runtime'))?.value === lock.owner;
await lock.release();
const afterRelease = await kv.get('lock/runtime');

const commit = await kv.atomic().check('doc', null).set('x', 'y').commit();
const deleted = await kv.delete('doc');
const missing = await connect({ url, bucket: '00000000-0000-4000-8000-000000000000', token: 'S' })
  .get('k')
  .catch((e) => e);
const unreachable = await connect({ url: env.DEAD_URL, bucket, token: 'S', retries: 0 })
  .get('k')
  .catch((e) => e);

const result = {
  max: `${typeof readMax?.value}:${String(readMax?.value)}`,
  maxRevision: readMax?.revision === max.revision,
  bytesOk: readBytes?.value instanceof Uint8Array && readBytes.value.length === 256 && readBytes.value.every((b, i) => b === i),
  bytesType: readBytes?.type,
  count: `${typeof count.value}:${String(count.value)}`,
  updated: String(updated.value),
  numberRule: `${ninety.type}:${typeof ninety.value}`,
  exactText: three.text,
  stale: stale instanceof PreconditionFailedError ? `412 current ${stale.currentRevision === max.revision}` : String(stale),
  keys,
  listed,
  many: many.entries.map((e) => (e === null ? null : `${e.key}=${String(e.value)}:${e.type}`)),
  manyRevision: many.entries.every((e) => e === null || e.revision <= many.revision),
  expired,
  textExpires: text?.expiresAt instanceof Date && text.expiresAt.getTime() > Date.now(),
  persisted,
  notLive,
  pruned: pruned.deleted,
  watched,
  lockValue,
  afterRelease,
  commit: commit.ok ? 'ok' : commit.failedChecks.map((c) => c.key).join(','),
  deleted,
  doc: await kv.get('doc'),
  missing: missing instanceof NotFoundError ? `${missing.status} ${missing.detail}` : String(missing),
  unreachable:
    unreachable instanceof KvbNetworkError ? `KvbNetworkError ${unreachable.reason}` : `${unreachable?.name}: ${unreachable?.message}`,
};
console.log(JSON.stringify(result));
