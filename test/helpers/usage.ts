import BetterSqlite3 from 'better-sqlite3';
import { TEST_BACKEND, withAdminClient } from './backend.js';

/** What a bucket really stores, counted in the database itself, beside the usage counters kvb keeps. */
export async function recountUsage(
  db: string,
  bucket: string,
): Promise<{ keys: number; bytes: number; usage: { keys: number; bytes: number } }> {
  const countSql = 'select count(*) as n, coalesce(sum(length(key) + length(value)), 0) as b from entries where bucket_id = ';
  const usageSql = 'select usage_keys as k, usage_bytes as b from buckets where id = ';
  if (TEST_BACKEND === 'sqlite') {
    const file = new BetterSqlite3(db, { readonly: true });
    try {
      const counted = file.prepare(`${countSql}?`).get(bucket) as { n: number; b: number };
      const stored = file.prepare(`${usageSql}?`).get(bucket) as { k: number; b: number };
      return { keys: counted.n, bytes: counted.b, usage: { keys: stored.k, bytes: stored.b } };
    } finally {
      file.close();
    }
  }
  const schema = new URL(db).searchParams.get('schema')!;
  return withAdminClient(async (client) => {
    await client.query(`set search_path to "${schema}"`);
    const counted = (await client.query(`${countSql}$1`, [bucket])).rows[0] as { n: string; b: string };
    const stored = (await client.query(`${usageSql}$1`, [bucket])).rows[0] as { k: string; b: string };
    return { keys: Number(counted.n), bytes: Number(counted.b), usage: { keys: Number(stored.k), bytes: Number(stored.b) } };
  });
}
