/**
 * `npx tsx bench/primary-check-cost.ts --db postgres://…/db`: what asking `pg_is_in_recovery()`
 * costs a write batch's read (`readBatch`, a transaction of 10 keys), in the generic wrapper
 * every plain read gets (postgres-primary-reads.ts `checkingPrimary`, its rows then unwrapped
 * by `primaryResult`) against the statement alone. Both forms run on one connection in
 * alternating blocks; it prints, per statement, the PostgreSQL backend's CPU (utime + stime of
 * that backend's process in /proc, so only for a server on this machine) and this process's CPU
 * (the query and the unwrapping). CPU time, not wall time: on a busy machine it still compares
 * the two forms, which run interleaved in one process against one backend.
 */
import { parseArgs } from 'node:util';
import pg from 'pg';
import { openStore } from '../src/store/open-store.js';
import { checkingPrimary, primaryResult } from '../src/store/postgres/postgres-primary-reads.js';
import { type CompiledStatement, bind } from '../src/store/statements.js';
import { cpuMs } from './processes.js';

const { values: flags } = parseArgs({
  options: { db: { type: 'string' }, blocks: { type: 'string', default: '10' }, block: { type: 'string', default: '1000' } },
});
if (!flags.db) {
  console.error('primary-check-cost: --db postgres://… is required');
  process.exit(2);
}
const schema = `kvb_primary_check_${process.pid}`;
const url = new URL(flags.db);
url.searchParams.set('schema', schema);
const store = await openStore(url.toString(), { durability: 'normal', poolSize: 2 });
const keys = Array.from({ length: 10 }, (_, i) => `k${i}`);
await store.buckets.create({
  id: 'b',
  email: 'bench@example.com',
  secretKeyHash: null,
  readKeyHash: null,
  writeKeyHash: null,
  signingKey: null,
  signingKeyGeneration: 0,
  tokenSalt: null,
  defaultTtl: 0,
});
for (const key of keys)
  await store.write('b', { op: 'set', key, value: { type: 'text', data: Buffer.alloc(100, 'x') }, expiresAt: null, now: Date.now() });
const plain = (store as unknown as { sql: Record<string, CompiledStatement> }).sql.readBatch!;
const checked = checkingPrimary(plain);
const values = bind(plain, { bucket: 'b', keys: keys.map((k) => Buffer.from(k)) });

const client = new pg.Client({ connectionString: flags.db });
await client.connect();
const backend = Number((await client.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!.pid);
const totals = { plain: { pg: 0, node: 0, n: 0 }, checked: { pg: 0, node: 0, n: 0 } };
const block = Number(flags.block);
for (let i = 0; i < Number(flags.blocks) * 2; i++) {
  const form = i % 2 === 0 ? 'plain' : 'checked';
  const statement = form === 'plain' ? plain : checked;
  const pgBefore = cpuMs(backend);
  const nodeBefore = process.cpuUsage();
  for (let j = 0; j < block; j++) {
    const result = await client.query({ name: `bench_${form}`, text: statement.sql, values });
    const rows = form === 'checked' ? primaryResult(result).rows : result.rows;
    if (rows.length !== keys.length) throw new Error(`${form}: ${rows.length} rows`);
  }
  const node = process.cpuUsage(nodeBefore);
  totals[form].pg += cpuMs(backend) - pgBefore;
  totals[form].node += (node.user + node.system) / 1000;
  totals[form].n += block;
}
await client.end();
await (store as unknown as { close(): Promise<void> }).close();
const admin = new pg.Client({ connectionString: flags.db });
await admin.connect();
await admin.query(`drop schema ${schema} cascade`);
await admin.end();
const per = (t: { pg: number; node: number; n: number }) => ({
  pgMicros: Number(((t.pg * 1000) / t.n).toFixed(1)),
  nodeMicros: Number(((t.node * 1000) / t.n).toFixed(1)),
});
console.log(JSON.stringify({ statements: totals.plain.n, plain: per(totals.plain), checked: per(totals.checked) }));
