import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * The layering of STYLE.md, read off the import lines:
 * cli -> client -> values, errors; server -> store (interface), auth, values, errors;
 * only the `serve` command reaches the server, and only when it runs. Nothing imports cli.
 */
const SRC = fileURLToPath(new URL('../../src/', import.meta.url));

interface Import {
  from: string;
  to: string;
  dynamic: boolean;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? sourceFiles(join(dir, entry.name)) : entry.name.endsWith('.ts') ? [join(dir, entry.name)] : [],
  );
}

function importsOf(file: string): Import[] {
  const text = readFileSync(file, 'utf8');
  const found: Import[] = [];
  const patterns: Array<[RegExp, boolean]> = [
    [/^\s*(?:import|export)\s[^'";]*?from\s+'(\.[^']+)'/gm, false],
    [/^\s*import\s+'(\.[^']+)'/gm, false],
    [/\bimport\(\s*'(\.[^']+)'\s*\)/g, true],
  ];
  for (const [pattern, dynamic] of patterns) {
    for (const match of text.matchAll(pattern)) {
      const target = resolve(dirname(file), match[1]!).replace(/\.js$/, '.ts');
      found.push({ from: relative(SRC, file), to: relative(SRC, target), dynamic });
    }
  }
  return found;
}

const ALL = sourceFiles(SRC).flatMap(importsOf);
const CONSOLE_SRC = fileURLToPath(new URL('../../console/src/', import.meta.url));

/** Module-level imports (type-only ones included: they are loops to a reader) of every .ts/.tsx file under `root`. */
function moduleGraph(root: string): Map<string, string[]> {
  const files = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
      entry.isDirectory() ? files(join(dir, entry.name)) : /\.tsx?$/.test(entry.name) ? [join(dir, entry.name)] : [],
    );
  const graph = new Map<string, string[]>();
  for (const file of files(root)) {
    const targets = [...readFileSync(file, 'utf8').matchAll(/^\s*(?:import|export)\s[^'";]*?from\s+'(\.[^']+)'/gm)].map((m) =>
      relative(root, resolve(dirname(file), m[1]!)).replace(/\.js$/, ''),
    );
    graph.set(relative(root, file).replace(/\.tsx?$/, ''), targets);
  }
  return graph;
}

/** The strongly connected groups of more than one module (Tarjan), each sorted: every one is an import loop. */
function loopsOf(graph: Map<string, string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const loops: string[][] = [];
  const visit = (v: string) => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const group: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      group.push(w);
    } while (w !== v);
    if (group.length > 1) loops.push(group.sort());
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return loops;
}

const importLoops = (root: string) => loopsOf(moduleGraph(root));
const layer = (path: string) => path.split('/')[0]!.replace(/\.ts$/, '');
const violations = (rule: (i: Import) => boolean) => ALL.filter(rule).map((i) => `${i.from} -> ${i.to}${i.dynamic ? ' (dynamic)' : ''}`);

describe('import direction', () => {
  it('reads a realistic number of import lines (the check is not vacuous)', () => {
    expect(ALL.length).toBeGreaterThan(50);
    expect(ALL.some((i) => i.dynamic && i.to === 'server/run-server.ts')).toBe(true);
  });

  it('limits (the one source of each limit and vocabulary) imports nothing', () => {
    expect(ALL.some((i) => i.to === 'limits.ts')).toBe(true);
    expect(violations((i) => layer(i.from) === 'limits')).toEqual([]);
  });

  it('values and errors depend on nothing but themselves and limits', () => {
    const base = ['values', 'errors', 'limits'];
    expect(violations((i) => ['values', 'errors'].includes(layer(i.from)) && !base.includes(layer(i.to)))).toEqual([]);
  });

  it('auth depends only on values, errors and limits', () => {
    expect(violations((i) => layer(i.from) === 'auth' && !['auth', 'values', 'errors', 'limits'].includes(layer(i.to)))).toEqual([]);
  });

  it('store never reaches up into server, client, cli or auth', () => {
    expect(violations((i) => layer(i.from) === 'store' && ['server', 'client', 'cli', 'auth'].includes(layer(i.to)))).toEqual([]);
  });

  it('server sees the store through its interface only, never a driver, and never cli or client', () => {
    const driver = /^store\/(sqlite|postgres)\//;
    expect(violations((i) => layer(i.from) === 'server' && (['cli', 'client'].includes(layer(i.to)) || driver.test(i.to)))).toEqual([]);
  });

  it('each engine (store/sqlite, store/postgres) keeps to itself: neither imports the other, and the write rules (store/core) import neither', () => {
    const engine = (path: string) => /^store\/(sqlite|postgres|core)\//.exec(path)?.[1];
    expect(ALL.filter((i) => engine(i.from) === 'sqlite').length).toBeGreaterThan(5);
    expect(ALL.filter((i) => engine(i.from) === 'postgres').length).toBeGreaterThan(5);
    expect(
      violations(
        (i) => engine(i.from) !== undefined && engine(i.to) !== undefined && engine(i.from) !== engine(i.to) && engine(i.to) !== 'core',
      ),
    ).toEqual([]);
  });

  it('client never imports server, store, auth or cli', () => {
    expect(violations((i) => layer(i.from) === 'client' && ['server', 'store', 'auth', 'cli'].includes(layer(i.to)))).toEqual([]);
  });

  it('client (published as kvb/client for browsers, Deno and Bun) imports no node: module and no package, nor anything that does', () => {
    const reached = new Set<string>();
    const visit = (path: string) => {
      if (reached.has(path)) return;
      reached.add(path);
      for (const i of ALL) if (i.from === path) visit(i.to);
    };
    for (const path of ALL.map((i) => i.from).filter((path) => layer(path) === 'client')) visit(path);
    expect([...reached].some((path) => path === 'values/value-type.ts')).toBe(true);
    const bare = [...reached].flatMap((path) =>
      [
        ...readFileSync(join(SRC, path), 'utf8').matchAll(
          /^\s*(?:import|export)\s[^'";]*?from\s+'([^.][^']*)'|^\s*import\s+'([^.][^']*)'|\bimport\(\s*'([^.][^']*)'\s*\)/gm,
        ),
      ].map((m) => `${path} -> ${m[1] ?? m[2] ?? m[3]}`),
    );
    expect(bare).toEqual([]);
  });

  it('cli loads server code only from the serve command, and only lazily (its defaults excepted)', () => {
    const serverReach = (i: Import) => layer(i.from) === 'cli' && ['server', 'store', 'auth'].includes(layer(i.to));
    const allowed = (i: Import) =>
      (i.from === 'cli/commands/serve.ts' && (i.dynamic || i.to === 'server/server-config.ts')) ||
      // The operator commands (kvb db dump|restore|check|backup) open the storage directly, lazily, never the server.
      (i.from === 'cli/commands/db.ts' && i.dynamic && layer(i.to) === 'store');
    expect(violations((i) => serverReach(i) && !allowed(i))).toEqual([]);
  });

  it('no import loops: no module reaches itself through module-level imports (type-only imports count)', () => {
    expect(importLoops(SRC)).toEqual([]);
    expect(importLoops(CONSOLE_SRC)).toEqual([]);
  });

  it('the loop check finds a loop (it is not vacuous)', () => {
    const graph = new Map([
      ['a.ts', ['b.ts']],
      ['b.ts', ['c.ts']],
      ['c.ts', ['a.ts']],
      ['d.ts', ['a.ts']],
    ]);
    expect(loopsOf(graph)).toEqual([['a.ts', 'b.ts', 'c.ts']]);
  });

  it('nothing outside cli imports cli', () => {
    expect(violations((i) => layer(i.to) === 'cli' && layer(i.from) !== 'cli')).toEqual([]);
  });
});
