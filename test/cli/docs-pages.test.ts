import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { CommandUnknownOpts as Command } from '@commander-js/extra-typings';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildProgram } from '../../src/cli/program.js';
import * as client from '../../src/client/index.js';
import { docBlocks, expectedOutput } from '../helpers/doc-blocks.js';
import { type RunningServer, startServer } from '../helpers/server.js';

/**
 * The README is the front door and the guide lives in docs/ (STYLE.md, "Docs like etcd and
 * fastify"). This checks every page: its links lead somewhere, its JSON parses, its `kvb …`
 * lines use real commands and flags, and its `kvb/client` imports name real exports.
 */
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const read = (path: string) => readFileSync(join(ROOT, path), 'utf8');
const PAGES = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
  'bench/results/older-runs.md',
];

const blocks = (page: string) => docBlocks(ROOT, page);

/** The page's text outside code blocks. */
const prose = (page: string) => read(page).replace(/^```[^\n]*\n[\s\S]*?^```$/gm, '');

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens, repeats numbered. */
function anchors(page: string): Set<string> {
  const seen = new Map<string, number>();
  const result = new Set<string>();
  for (const [, heading] of prose(page).matchAll(/^#{1,6} (.+)$/gm)) {
    const slug = heading!
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{N}_\- ]/gu, '')
      .replace(/ /g, '-');
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    result.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return result;
}

describe('the README is the front door', () => {
  it('is at most 260 lines and links to every page of the guide', () => {
    const readme = read('README.md');
    expect(readme.split('\n').length).toBeLessThanOrEqual(260);
    for (const page of PAGES.filter((p) => p !== 'README.md')) expect(readme, page).toContain(`](${page})`);
  });

  it('keeps the two set-up commands', () => {
    const readme = read('README.md');
    expect(readme).toContain('npm install && npm start');
    expect(readme).toContain('npm install && npm test');
  });
});

describe('links', () => {
  const links = PAGES.flatMap((page) =>
    [...prose(page).matchAll(/\]\(([^)\s]+)\)/g)].map((m) => ({ page, target: m[1]! })).filter((l) => !/^[a-z]+:/.test(l.target)),
  );

  it('finds links to check (the check is not vacuous)', () => {
    expect(links.length).toBeGreaterThan(30);
    expect(links.some((l) => l.target.includes('.md#'))).toBe(true);
  });

  it('every relative link leads to a file that exists, and to a heading that exists', () => {
    const broken: string[] = [];
    for (const { page, target } of links) {
      const [path, anchor] = target.split('#') as [string, string | undefined];
      const file = path === '' ? page : relative(ROOT, join(ROOT, dirname(page), path));
      if (!existsSync(join(ROOT, file))) {
        broken.push(`${page}: ${target} (no file ${file})`);
      } else if (anchor !== undefined && file.endsWith('.md') && !anchors(file).has(anchor)) {
        broken.push(`${page}: ${target} (no heading #${anchor} in ${file})`);
      } else if (anchor !== undefined && statSync(join(ROOT, file)).isDirectory()) {
        broken.push(`${page}: ${target} (an anchor into a directory)`);
      }
    }
    expect(broken).toEqual([]);
  });
});

describe('examples', () => {
  const all = PAGES.flatMap(blocks);

  it('every JSON block parses', () => {
    const json = all.filter((b) => b.lang === 'json');
    expect(json.length).toBeGreaterThan(0);
    for (const b of json) expect(() => JSON.parse(b.text), `${b.page}:${b.line}`).not.toThrow();
  });

  it('every name imported from kvb-client (or kvb/client) is exported by it', () => {
    const source = read('src/client/index.ts');
    const imports = all
      .filter((b) => ['ts', 'js', 'typescript', 'javascript'].includes(b.lang))
      .flatMap((b) =>
        [...b.text.matchAll(/import\s+(type\s+)?\{([^}]*)\}\s+from\s+'kvb(?:\/|-)client'/g)].map((m) => ({
          b,
          typeOnly: !!m[1],
          names: m[2]!,
        })),
      );
    expect(imports.length).toBeGreaterThan(3);
    for (const { b, typeOnly, names } of imports) {
      for (const raw of names
        .split(',')
        .map((n) => n.trim())
        .filter(Boolean)) {
        const isType = typeOnly || raw.startsWith('type ');
        const name = raw.replace(/^type\s+/, '').split(/\s+as\s+/)[0]!;
        if (isType) expect(source, `${b.page}:${b.line}: type ${name}`).toMatch(new RegExp(`\\b${name}\\b`));
        else expect(Object.keys(client), `${b.page}:${b.line}: ${name}`).toContain(name);
      }
    }
  });

  describe('every `kvb …` line names a real command and only its real flags', () => {
    const program = buildProgram();

    /** Shell words of one line (quotes kept together, not interpreted); separators as their own words. */
    function words(line: string): string[] {
      const out: string[] = [];
      const re = /\s*((?:[^\s'"|;&()<>]|'[^']*'|"(?:[^"\\]|\\.)*")+|\|\||&&|\$\(|[|;&()]|\d?>>?|<)/g;
      for (const m of line.matchAll(re)) out.push(m[1]!);
      return out;
    }

    /** The kvb invocations of a shell block: each simple command whose program is kvb (or bin/kvb). */
    function invocations(text: string): string[][] {
      const joined = text.replace(/\\\n/g, ' ');
      const found: string[][] = [];
      for (let line of joined.split('\n')) {
        line = line.replace(/^\s*\$ /, '').replace(/(^|\s)#.*$/, '');
        let segment: string[] = [];
        const flush = () => {
          let i = 0;
          while (i < segment.length && /^[A-Z_][A-Z0-9_]*=/.test(segment[i]!)) i++;
          while (['sudo', 'env', 'exec', 'time', 'node', 'npx', 'nohup'].includes(segment[i] ?? '')) {
            i++;
            while (segment[i]?.startsWith('-')) i += segment[i] === '-u' ? 2 : 1;
            while (i < segment.length && /^[A-Z_][A-Z0-9_]*=/.test(segment[i]!)) i++;
          }
          const head = segment[i];
          if (head === 'kvb' || head?.endsWith('bin/kvb')) found.push(segment.slice(i + 1).filter((w) => !/^\d?>>?$|^<$/.test(w)));
          segment = [];
        };
        for (const w of words(line)) {
          if (['|', '||', '&&', ';', '&', '$(', '(', ')'].includes(w)) flush();
          else segment.push(w);
        }
        flush();
      }
      return found;
    }

    /** Why these words are not a valid kvb invocation, or undefined when they are. */
    function problem(args: string[]): string | undefined {
      let command: Command = program as unknown as Command;
      const chain: Command[] = [command];
      let sawPositional = false;
      for (let i = 0; i < args.length; i++) {
        const word = args[i]!;
        if (word === '--') break;
        if (word.startsWith('-') && word !== '-' && !/^-\d/.test(word)) {
          if (['-h', '--help'].includes(word)) continue;
          const flag = word.split('=')[0]!;
          const option = chain.flatMap((c) => c.options).find((o) => o.long === flag || o.short === flag);
          if (!option)
            return `unknown flag ${flag} for kvb ${chain
              .slice(1)
              .map((c) => c.name())
              .join(' ')}`.trimEnd();
          if ((option.required || option.optional) && !word.includes('=')) i++;
          continue;
        }
        if (/^[$"'<]/.test(word) || sawPositional) {
          sawPositional = true;
          continue;
        }
        const sub = command.commands.find((c) => c.name() === word || c.aliases().includes(word));
        if (sub) {
          command = sub as Command;
          chain.push(command);
        } else if (command === (program as unknown as Command)) {
          return `unknown command ${word}`;
        } else {
          sawPositional = true;
        }
      }
      return undefined;
    }

    const shell = all.filter((b) => ['sh', 'bash', 'console', 'shell'].includes(b.lang));
    const calls = shell.flatMap((b) => invocations(b.text).map((args) => ({ b, args })));

    it('finds kvb lines in several pages (the check is not vacuous)', () => {
      expect(calls.length).toBeGreaterThan(40);
      expect(new Set(calls.map((c) => c.b.page)).size).toBeGreaterThanOrEqual(4);
      // …and it can fail:
      expect(problem(['frobnicate'])).toBe('unknown command frobnicate');
      expect(problem(['get', 'k', '--nope'])).toBe('unknown flag --nope for kvb get');
      expect(problem(['incr', 'stock', '-1'])).toBeUndefined();
      expect(problem(['bucket', 'update', '--read-key', 'R', '--url', 'http://x'])).toBeUndefined();
    });

    it('each one parses against the real program', () => {
      const wrong = calls
        .map(({ b, args }) => ({ where: `${b.page}:${b.line}: kvb ${args.join(' ')}`, why: problem(args) }))
        .filter((c) => c.why);
      expect(wrong).toEqual([]);
    });
  });

  describe('the blocks marked `<!-- docs-test: run -->` run as shown against a real server', () => {
    const runnable = all.filter((b) => b.marker === 'run');
    let server: RunningServer;
    let cwd: string;
    beforeAll(async () => {
      server = await startServer();
      cwd = mkdtempSync(join(tmpdir(), 'kvb-docs-'));
      writeFileSync(join(cwd, 'icon.png'), Buffer.from([0x89, 0x50, 0x4e, 0x47]));
    });
    afterAll(async () => {
      await server?.stop();
      if (cwd) rmSync(cwd, { recursive: true, force: true });
    });

    it('there are some, in the README and the API reference', () => {
      expect(runnable.map((b) => b.page)).toEqual(expect.arrayContaining(['README.md', 'docs/http-api.md']));
    });

    it.each(runnable.map((b) => [`${b.page}:${b.line}`, b] as const))(
      '%s exits 0, prints nothing on stderr, and prints what its comments say',
      (_, b) => {
        const script = b.text.replaceAll('http://127.0.0.1:8080', server.url);
        const result = spawnSync('bash', ['-o', 'pipefail', '-c', script], { cwd, encoding: 'utf8', timeout: 60_000 });
        expect(result.stderr).toBe('');
        expect(result.status).toBe(0);
        // A comment after a command (`curl … # hello`) is what that command prints; they appear in order.
        let rest = result.stdout;
        const expected = expectedOutput(b.text);
        expect(expected.length).toBeGreaterThan(0);
        for (const text of expected) {
          const at = rest.indexOf(text);
          expect(at, `${text} in ${JSON.stringify(result.stdout.slice(0, 2000))}`).toBeGreaterThanOrEqual(0);
          rest = rest.slice(at + text.length);
        }
      },
    );
  });
});
