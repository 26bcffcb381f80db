/** `kvb get A B …`: several keys read at one revision, as JSON rows (int64 as decimal strings). */
import type { KvbHttp } from '../client/kvb-http.js';
import { type JsonNode, parseJsonSource } from '../values/json-source.js';
import { EXIT_CODES } from '../errors.js';

/** Some keys were absent (exit code 2, like `kvb get` of one missing key), after every row was printed. */
export class MissingKeysError extends Error {
  readonly exitCode = EXIT_CODES.notFound;
  constructor(keys: string[]) {
    super(`no such key: ${keys.map((k) => JSON.stringify(k)).join(', ')}`);
  }
}

const field = (node: JsonNode, name: string) => (node.kind === 'object' ? node.entries.find(([n]) => n === name)?.[1] : undefined);

/**
 * One `{"key","type","value","expires_at","revision"}` row per key, in order; type and value null
 * when absent. Each value is the server's own source text (int64 a decimal string, JSON exactly
 * as stored, bytes base64): nothing goes through a JS number on the way.
 */
export async function getManyRows(
  client: KvbHttp,
  bucket: string,
  keys: string[],
): Promise<{ revision: number; rows: string[]; missing: string[] }> {
  const outcome = await client.txn(bucket, JSON.stringify({ txn: keys.map((key) => ({ get: key })) }));
  if (!outcome.ok || outcome.results === undefined) throw new Error('the server answered without results (is it older than this kvb?)');
  const root = parseJsonSource(outcome.results);
  const results = field(root, 'results');
  const revision = Number(field(root, 'revision')?.source);
  const missing: string[] = [];
  const rows = keys.map((key, i) => {
    const result = results?.kind === 'array' ? results.items[i] : undefined;
    if (result?.kind !== 'object') {
      missing.push(key);
      return `{"key":${JSON.stringify(key)},"type":null,"value":null,"expires_at":null,"revision":null}`;
    }
    const source = (name: string) => field(result, name)?.source ?? 'null';
    return `{"key":${JSON.stringify(key)},"type":${source('type')},"value":${source('value')},"expires_at":${source('expires_at')},"revision":${source('rev')}}`;
  });
  return { revision, rows, missing };
}
