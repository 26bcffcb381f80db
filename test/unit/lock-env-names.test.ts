import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/** Every KVB_LOCK* name the client's and the CLI's sources and the docs mention is one `kvb lock` sets for its command. */
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

describe('the environment kvb lock gives its command', () => {
  it('is named the same wherever it is mentioned', () => {
    const lock = readFileSync(join(ROOT, 'src/cli/commands/lock.ts'), 'utf8');
    const setLine = /env: \{ \.\.\.process\.env, ([^}]*)\}/.exec(lock)?.[1];
    expect(setLine, 'lock.ts passes the command its env').toBeDefined();
    const set = new Set([...setLine!.matchAll(/(KVB_LOCK\w*):/g)].map((m) => m[1]));
    expect([...set].sort()).toEqual(['KVB_LOCK', 'KVB_LOCK_OWNER', 'KVB_LOCK_REVISION']);
    const files = [
      ...readdirSync(join(ROOT, 'src/client')).map((f) => `src/client/${f}`),
      ...readdirSync(join(ROOT, 'src/cli/commands')).map((f) => `src/cli/commands/${f}`),
      ...readdirSync(join(ROOT, 'docs'))
        .filter((f) => f.endsWith('.md'))
        .map((f) => `docs/${f}`),
    ];
    const unknown = files.flatMap((file) =>
      [...readFileSync(join(ROOT, file), 'utf8').matchAll(/\bKVB_LOCK\w*/g)]
        .map((m) => m[0])
        .filter((name) => !set.has(name))
        .map((name) => `${file}: ${name}`),
    );
    expect(unknown).toEqual([]);
  });
});
