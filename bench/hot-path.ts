/**
 * `npm run bench:hot-path`: kvb's own CPU per request on the single-key cases, measured in one
 * process through `app.inject` (no sockets, no load generator), in waves of 50 concurrent
 * requests like autocannon's -c 50. On a machine shared with other work, req/s swings by half;
 * the least CPU per request over several runs moves by a microsecond or two, which is what a
 * change to the hot path needs to be seen. inject's own cost is in every figure alike, so compare
 * figures with each other, not with the HTTP bench. Prints JSON lines; stdout of the server's
 * logger goes to /dev/null. Usage: tsx bench/hot-path.ts [dist directory] [cases] [runs]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const dist = resolve(process.argv[2] ?? new URL('../dist', import.meta.url).pathname);
const cases = (process.argv[3] ?? 'get_hit,get_miss,set_text,counter,txn_10').split(',');
const runs = Number(process.argv[4] ?? 7);
const WAVE = 50;
const PER_RUN = 5000;
const KEYS = 1000;
const TEXT = 'v'.repeat(100);

type App = { inject(o: object): Promise<{ statusCode: number; body: string }>; ready(): Promise<unknown>; close(): Promise<unknown> };

async function main() {
  const { buildApp } = (await import(join(dist, 'server/app.js'))) as { buildApp: (s: unknown, c: unknown) => Promise<App> };
  const { openStore } = (await import(join(dist, 'store/open-store.js'))) as {
    openStore: (p: string, o: object) => Promise<{ close(): Promise<void> }>;
  };
  const { DEFAULT_SERVER_CONFIG } = (await import(join(dist, 'server/server-config.js'))) as { DEFAULT_SERVER_CONFIG: object };
  const dir = mkdtempSync(join(tmpdir(), 'kvb-hot-'));
  const store = await openStore(join(dir, 'kvb.db'), { durability: 'normal', poolSize: 10 });
  const app = await buildApp(store, { ...DEFAULT_SERVER_CONFIG, console: false });
  await app.ready();
  const created = await app.inject({
    method: 'POST',
    url: '/api/v1/',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    payload: 'email=bench%40example.com',
  });
  const bucket = created.body.trim();
  const txn = (t: number) =>
    JSON.stringify({ txn: Array.from({ length: 10 }, (_, j) => ({ set: `t${(t * 10 + j) % KEYS}`, value: TEXT })) });
  const requests: Record<string, (i: number) => object> = {
    get_hit: (i) => ({ method: 'GET', url: `/api/v1/${bucket}/k${i % KEYS}` }),
    get_miss: (i) => ({ method: 'GET', url: `/api/v1/${bucket}/missing${i % KEYS}` }),
    set_text: (i) => ({ method: 'POST', url: `/api/v1/${bucket}/k${i % KEYS}`, headers: { 'content-type': 'text/plain' }, payload: TEXT }),
    counter: (i) => ({ method: 'PATCH', url: `/api/v1/${bucket}/c${i % KEYS}`, headers: { 'content-type': 'text/plain' }, payload: '+1' }),
    txn_10: (i) => ({ method: 'POST', url: `/api/v1/${bucket}`, headers: { 'content-type': 'application/json' }, payload: txn(i) }),
  };
  const drive = async (make: (i: number) => object, n: number) => {
    for (let i = 0; i < n; i += WAVE) {
      const wave = await Promise.all(Array.from({ length: WAVE }, (_, j) => app.inject(make(i + j))));
      for (const r of wave) if (r.statusCode >= 500) throw new Error(`status ${r.statusCode}: ${r.body}`);
    }
  };
  await drive(requests.set_text!, KEYS);
  for (const name of cases) {
    const make = requests[name]!;
    await drive(make, PER_RUN); // warm-up
    const perRequest: number[] = [];
    for (let r = 0; r < runs; r++) {
      const before = process.cpuUsage();
      await drive(make, PER_RUN);
      const used = process.cpuUsage(before);
      perRequest.push((used.user + used.system) / PER_RUN);
    }
    perRequest.sort((a, b) => a - b);
    const round = (x: number) => Math.round(x * 10) / 10;
    process.stderr.write(
      `${JSON.stringify({ case: name, minUs: round(perRequest[0]!), medianUs: round(perRequest[Math.floor(runs / 2)]!) })}\n`,
    );
  }
  await app.close();
  await store.close();
  rmSync(dir, { recursive: true, force: true });
}

await main();
