import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  DEFAULT_BUCKET_TTL_SECONDS,
  DEFAULT_LIST_LIMIT,
  HISTORY_PAGE_DEFAULT,
  HISTORY_PAGE_MAX,
  MAX_KEY_BYTES,
  MAX_LIST_LIMIT,
  MAX_PREFIX_DELETE_KEYS,
  MAX_TTL_SECONDS,
  MAX_TXN_OPS,
  MAX_VALUE_BYTES,
  MAX_VALUE_BYTES_CEILING,
  PERMISSIONS,
  VALUE_TYPES,
} from '../../src/limits.js';
import { TXN_BODY_LIMIT } from '../../src/server/routes/transaction-route.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const read = (path: string) => readFileSync(join(ROOT, path), 'utf8');
/** 50000 as the prose writes it: 50,000. */
const grouped = (n: number) => n.toLocaleString('en-US');
const kib = (bytes: number) => `${bytes / 1024} KiB`;

/**
 * Where the hand-written docs state a limit, each phrase built from src/limits.ts: a changed
 * limit fails here until the page says the new number.
 */
const STATED: Array<[file: string, phrase: string]> = [
  ['README.md', `\`default_ttl\`\n${DEFAULT_BUCKET_TTL_SECONDS} s)`],
  ['docs/http-api.md', `| key | 1 to ${MAX_KEY_BYTES} bytes of UTF-8 after percent-decoding |`],
  ['docs/http-api.md', `\`key is longer than ${MAX_KEY_BYTES} bytes\``],
  ['docs/http-api.md', `integer seconds, 0 to ${MAX_TTL_SECONDS} (0 = no expiry); token \`ttl\` 1 to ${MAX_TTL_SECONDS} |`],
  ['docs/http-api.md', `| list \`limit\` | integer 0 to ${MAX_LIST_LIMIT}, default ${DEFAULT_LIST_LIMIT} |`],
  ['docs/http-api.md', `at most \`limit\` keys (default ${DEFAULT_LIST_LIMIT})`],
  [
    'docs/http-api.md',
    `| transaction | 1 to ${MAX_TXN_OPS} operations, body at most ${grouped(TXN_BODY_LIMIT)} bytes (${MAX_TXN_OPS} × (${MAX_VALUE_BYTES} + ${MAX_KEY_BYTES} + `,
  ],
  ['docs/http-api.md', `\n1 to ${MAX_TXN_OPS} operations.`],
  ['docs/http-api.md', `the ${grouped(MAX_TXN_OPS)} operations`],
  ['docs/http-api.md', `at most ${grouped(MAX_PREFIX_DELETE_KEYS)} keys together`],
  ['docs/http-api.md', `\`prefix\` (1 to ${MAX_KEY_BYTES} bytes)`],
  ['docs/http-api.md', `\`ttl\` (1 to ${MAX_TTL_SECONDS} seconds)`],
  [
    'docs/http-api.md',
    `from ${PERMISSIONS.map((p) => `\`${p}\``)
      .join(', ')
      .replace(/, (?=`enumerate`)/, ',\n')})`,
  ],
  ['docs/history.md', `(default ${HISTORY_PAGE_DEFAULT}, at most ${HISTORY_PAGE_MAX})`],
  ['docs/cli.md', `at most ${kib(MAX_VALUE_BYTES)} (${MAX_VALUE_BYTES} bytes, the spec's limit)`],
  ['docs/cli.md', `${grouped(MAX_PREFIX_DELETE_KEYS)} keys; a larger prefix in parts`],
  ['docs/client.md', `at most ${grouped(MAX_PREFIX_DELETE_KEYS)} keys`],
  ['docs/console.md', `up to ${MAX_TXN_OPS})`],
  ['docs/operations.md', `| \`KVB_DEFAULT_TTL\` | \`${DEFAULT_BUCKET_TTL_SECONDS}\` |`],
  ['docs/operations.md', `| \`${MAX_VALUE_BYTES}\` | largest value (the spec's ${kib(MAX_VALUE_BYTES)}; up to ${MAX_VALUE_BYTES_CEILING})`],
  ['man/kvb.1', `The server's default is ${DEFAULT_BUCKET_TTL_SECONDS}.`],
  ['man/kvb.1', `Default ${DEFAULT_BUCKET_TTL_SECONDS}\n.RB ( KVB_DEFAULT_TTL ).`],
  ['man/kvb.1', `Default ${MAX_VALUE_BYTES}, the spec's ${kib(MAX_VALUE_BYTES)}; at most ${MAX_VALUE_BYTES_CEILING}`],
  ['man/kvb.1', `(at most ${grouped(MAX_PREFIX_DELETE_KEYS)} keys; delete a larger prefix in parts)`],
  [
    'man/kvb.1',
    `.BI \\-\\-permissions " list"\nComma\\-separated:\n${PERMISSIONS.map((p) => `.BR ${p} ,`)
      .join('\n')
      .replace(/,$/, '.')}`,
  ],
];

describe('one source per fact (src/limits.ts)', () => {
  it.each(STATED)('%s states %j', (file, phrase) => {
    expect(read(file)).toContain(phrase);
  });

  it('the HTTP reference lists the value types of src/limits.ts, in its order', () => {
    const page = read('docs/http-api.md');
    const table = page.slice(page.indexOf('| type | `Kvb-Type` |'));
    const rows = table.slice(0, table.indexOf('\n\n'));
    expect([...rows.matchAll(/^\| [^|]+ \| `([a-z0-9]+)` \|/gm)].map((m) => m[1])).toEqual([...VALUE_TYPES]);
  });

  it('no source file restates a limit by its number', () => {
    // The limits whose numbers are distinctive enough to find (1000000 is also a count elsewhere).
    // Comments may show one in a worked example; code may not.
    const distinctive = [DEFAULT_BUCKET_TTL_SECONDS, MAX_TTL_SECONDS, MAX_PREFIX_DELETE_KEYS].map((n) => String(n));
    const pattern = new RegExp(`\\b(${distinctive.map((n) => `${n}|${n.replace(/\B(?=(\d{3})+$)/g, '_')}`).join('|')})\\b`);
    const files = ['src', 'console/src'].flatMap((dir) => sourceFiles(join(ROOT, dir)));
    expect(files.length).toBeGreaterThan(100);
    expect(pattern.test(read('src/limits.ts')), 'the pattern finds the definitions themselves').toBe(true);
    const code = (file: string) => readFileSync(file, 'utf8').replace(/^\s*(\/\/|\/?\*).*$/gm, '');
    const restated = files.filter((file) => !file.endsWith('/src/limits.ts') && pattern.test(code(file)));
    expect(restated.map((file) => file.slice(ROOT.length))).toEqual([]);
  });
});

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? sourceFiles(join(dir, entry.name)) : /\.tsx?$/.test(entry.name) ? [join(dir, entry.name)] : [],
  );
}
