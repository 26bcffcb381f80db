import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { CommandUnknownOpts as Command } from '@commander-js/extra-typings';
import { describe, expect, it } from 'vitest';
import { buildProgram } from '../../src/cli/program.js';
import { kvb } from '../helpers/cli.js';
import { GENERATED, replaceBetween } from '../../scripts/generate-docs.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const read = (path: string) => readFileSync(join(ROOT, path), 'utf8');

/** Every command and subcommand commander knows, as words: ['init'], ['bucket', 'show'], … */
function commandPaths(command: Command, prefix: string[] = []): Array<{ path: string[]; command: Command }> {
  return command.commands.flatMap((c) => [{ path: [...prefix, c.name()], command: c }, ...commandPaths(c, [...prefix, c.name()])]);
}

const program = buildProgram();
const commands = commandPaths(program);

describe('completion scripts', () => {
  it.each([
    ['bash', 'completions/kvb.bash'],
    ['zsh', 'completions/_kvb'],
    ['fish', 'completions/kvb.fish'],
  ])('the committed %s script is exactly what `kvb completion` generates (npm run completions)', async (shell, file) => {
    const result = await kvb(['completion', shell]);
    expect(result.exitCode).toBe(0);
    expect(result.out).toBe(read(file));
  });

  it('the bash script loads and registers the kvb completion', () => {
    const out = execFileSync('bash', ['-c', 'source completions/kvb.bash && complete -p kvb'], { cwd: ROOT, encoding: 'utf8' });
    expect(out).toMatch(/-F _kvb kvb$/m);
  });

  it('bash completes commands, subcommands, flags and flag values', () => {
    const complete = (words: string[]) =>
      execFileSync(
        'bash',
        [
          '-c',
          `source completions/kvb.bash; COMP_WORDS=(${words.map((w) => `'${w}'`).join(' ')}); COMP_CWORD=${words.length - 1}; _kvb; printf '%s\\n' "\${COMPREPLY[@]}"`,
        ],
        { cwd: ROOT, encoding: 'utf8' },
      )
        .split('\n')
        .filter(Boolean);
    expect(complete(['kvb', ''])).toEqual(expect.arrayContaining(commands.filter((c) => c.path.length === 1).map((c) => c.path[0])));
    expect(complete(['kvb', 'bucket', ''])).toEqual(expect.arrayContaining(['show', 'update', 'delete', 'exists']));
    expect(complete(['kvb', '--bucket', 'x', 'bucket', 'up'])).toEqual(['update']);
    expect(complete(['kvb', 'set', 'k', '--t'])).toEqual(expect.arrayContaining(['--ttl', '--type', '--token']));
    expect(complete(['kvb', 'set', 'k', '--type', ''])).toEqual(['json', 'text', 'int', 'float', 'bytes']);
    expect(complete(['kvb', 'ls', '--format', 'j'])).toEqual(['json', 'jsonl']);
    expect(complete(['kvb', 'completion', 'f'])).toEqual(['fish']);
    // The server and the local commands take no client connection flags; client commands do.
    expect(complete(['kvb', 'serve', '--'])).toEqual(expect.arrayContaining(['--port', '--db', '--help']));
    for (const words of [
      ['kvb', 'serve', '--'],
      ['kvb', 'db', 'check', '--'],
    ])
      expect(complete(words).filter((w) => ['--url', '--bucket', '--token', '--profile', '--ca', '--timeout'].includes(w))).toEqual([]);
    expect(complete(['kvb', 'get', 'k', '--'])).toEqual(expect.arrayContaining(['--url', '--bucket', '--token']));
  });

  const has = (shell: string) => spawnSync('sh', ['-c', `command -v ${shell}`]).status === 0;

  it.skipIf(!has('zsh'))('the zsh script parses, registers _kvb, and offers subcommands, flags and values', () => {
    expect(spawnSync('zsh', ['-n', 'completions/_kvb'], { cwd: ROOT }).status).toBe(0);
    const registered = execFileSync(
      'zsh',
      ['-fc', 'autoload -Uz compinit && compinit -u -D && source completions/_kvb && print -r -- $_comps[kvb]'],
      {
        cwd: ROOT,
        encoding: 'utf8',
        env: { ...process.env, HOME: tmpdir() },
      },
    );
    expect(registered).toBe('_kvb\n');
    const complete = (...words: string[]) =>
      execFileSync('zsh', ['-f', 'test/helpers/zsh-complete.zsh', 'completions/_kvb', ...words], { cwd: ROOT, encoding: 'utf8' })
        .split('\n')
        .filter(Boolean);
    expect(complete('kvb', 'bucket', '')).toEqual(['show', 'update', 'delete', 'exists']);
    expect(complete('kvb', 'set', 'k', '--type', '')).toEqual(['json', 'text', 'int', 'float', 'bytes']);
    expect(complete('kvb', 'get', '--')).toEqual(expect.arrayContaining(['--json', '--url', '--bucket', '--token', '--profile']));
    expect(complete('kvb', 'txn', '')).toContain('<files>');
  });

  it.skipIf(!has('fish'))('the fish script parses and completes subcommands, flags and values', () => {
    expect(spawnSync('fish', ['--no-execute', 'completions/kvb.fish'], { cwd: ROOT }).status).toBe(0);
    const complete = (line: string) =>
      execFileSync('fish', ['-c', `source completions/kvb.fish; complete -C ${JSON.stringify(line)}`], { cwd: ROOT, encoding: 'utf8' })
        .split('\n')
        .filter(Boolean)
        .map((l) => l.split('\t')[0]);
    expect(complete('kvb ')).toEqual(expect.arrayContaining(commands.filter((c) => c.path.length === 1).map((c) => c.path[0])));
    expect(complete('kvb bucket ').sort()).toEqual(['delete', 'exists', 'show', 'update']);
    expect(complete('kvb set k --type ').sort()).toEqual(['bytes', 'float', 'int', 'json', 'text']);
    expect(complete('kvb bucket show --')).toEqual(expect.arrayContaining(['--json', '--url', '--help']));
  });

  it('every command and flag is in every script', () => {
    for (const file of ['completions/kvb.bash', 'completions/_kvb', 'completions/kvb.fish']) {
      const script = read(file);
      for (const { path, command } of commands) {
        expect(script, `${file}: ${path.join(' ')}`).toContain(path.at(-1));
        for (const option of command.options) {
          const flag = file.endsWith('.fish') ? `-l ${option.long!.slice(2)}` : option.long!;
          expect(script, `${file}: ${path.join(' ')} ${option.long}`).toContain(flag);
        }
      }
    }
  });
});

describe('man page', () => {
  const man = read('man/kvb.1');
  /** The page as text, roff escapes for hyphens undone. */
  const text = man.replace(/\\-/g, '-');

  it('documents every command and subcommand in its own section', () => {
    for (const { path } of commands) {
      expect(text, path.join(' ')).toContain(`.SS "kvb ${path.join(' ')}"`);
    }
  });

  it('its SYNOPSIS names every command', () => {
    const synopsis = text.slice(text.indexOf('.SH SYNOPSIS'), text.indexOf('.SH DESCRIPTION'));
    const missing = program.commands
      .map((c) => c.name())
      .filter((name) => name !== 'help' && !new RegExp(`^\\.B kvb ${name}(\\s|$)`, 'm').test(synopsis));
    expect(missing).toEqual([]);
  });

  it('documents every flag, global and per command', () => {
    for (const option of program.options) expect(text, option.long).toContain(option.long);
    for (const { path, command } of commands) {
      for (const option of command.options) expect(text, `${path.join(' ')} ${option.long}`).toContain(option.long!);
    }
  });

  it('documents the environment variables, the config file and exit codes 0 to 5', () => {
    for (const name of ['KVB_URL', 'KVB_BUCKET', 'KVB_TOKEN', 'KVB_PROFILE', 'XDG_CONFIG_HOME', 'NO_COLOR']) expect(text).toContain(name);
    expect(text).toContain('$XDG_CONFIG_HOME/kvb/config.json');
    const exitStatus = text.slice(text.indexOf('.SH EXIT STATUS'), text.indexOf('.SH EXAMPLES'));
    for (const code of [0, 1, 2, 3, 4, 5]) expect(exitStatus).toContain(`.TP\n.B ${code}\n`);
  });

  it('the man page, docs/cli.md and --help show the one exit-code table (npm run docs regenerates the first two)', async () => {
    for (const { file, begin, end, text } of GENERATED) {
      const source = read(file);
      expect(source, `${file} is out of date: npm run docs`).toBe(replaceBetween(source, begin, end, text()));
    }
    const codes = (listed: string[]) => listed.map(Number);
    const guide = read('docs/cli.md');
    const guideCodes = codes([...guide.slice(guide.indexOf('<!-- exit-codes')).matchAll(/^\| (\d) \|/gm)].map((m) => m[1]!));
    const manCodes = codes([...man.matchAll(/^\.TP\n\.B (\d)\n/gm)].map((m) => m[1]!).filter((_, i, all) => all.indexOf(_) === i));
    const help = (await kvb(['get', '--help'])).out;
    const helpCodes = codes([...help.slice(help.indexOf('Exit codes:')).matchAll(/^ {2}(\d) {2}/gm)].map((m) => m[1]!));
    // Each code once, in order, everywhere; HTTP statuses listed in ascending order, with no empty lists.
    expect(new Set(helpCodes).size).toBe(helpCodes.length);
    expect(guideCodes).toEqual(helpCodes);
    expect(help).not.toMatch(/\(\s*,/);
    expect(help).toContain('(HTTP 429, 500, 503, 507)');
    expect(help).toContain('(HTTP 409, 412)');
    expect(manCodes.slice(-helpCodes.length)).toEqual(helpCodes);
  });

  it.skipIf(!existsSync('/usr/bin/groff'))('renders with groff without a single warning', () => {
    const result = spawnSync('groff', ['-man', '-Tutf8', '-ww', '-z', join(ROOT, 'man/kvb.1')], { encoding: 'utf8' });
    expect(result.status).toBe(0);
    expect(result.stderr).toBe('');
  });
});

describe('bin/kvb', () => {
  it("chooses a code cache by the program's own command names, which the build appends to its loader (no copied list)", () => {
    const { COMMAND_NAMES } = createRequire(import.meta.url)(join(ROOT, 'dist/load-bundle.cjs')) as { COMMAND_NAMES: string[] };
    expect(COMMAND_NAMES).toEqual([...program.commands.map((c) => c.name()), 'help']);
    expect(COMMAND_NAMES).toEqual(expect.arrayContaining(['history', 'rollback', 'serve']));
    expect(read('bin/kvb')).toMatch(/COMMAND_NAMES\.includes/);
    expect(read('bin/kvb')).not.toMatch(/'serve', 'get'/);
  });
});

describe('module boundaries', () => {
  const imports = (file: string) =>
    [...read(file).matchAll(/^\s*(import|export)\s[^;]*?from\s+'([^']+)'|import\('([^']+)'\)/gm)].map((m) => ({
      path: (m[2] ?? m[3])!,
      static: m[1] !== undefined && !/^\s*(import|export)\s+type\s/.test(m[0]),
    }));

  // The layering between folders (cli, client, server, store, …) is checked in test/unit/import-direction.test.ts.
  it('start-up loads every command definition but, statically, no HTTP, clack, client or server, and of Node only what every run loads', () => {
    // Walk every static (value) import from main.ts: what `kvb --help` loads before any command runs.
    const seen = new Set<string>();
    const packages = new Set<string>();
    const visit = (file: string) => {
      if (seen.has(file)) return;
      seen.add(file);
      for (const { path, static: isStatic } of imports(file)) {
        if (!isStatic) continue;
        if (path.startsWith('.')) visit(join(file, '..', path).replace(/\.js$/, '.ts'));
        else packages.add(path);
      }
    };
    visit('src/cli/main.ts');
    expect([...seen].filter((f) => f.startsWith('src/cli/commands/')).length).toBeGreaterThanOrEqual(12);
    for (const file of seen) expect(file).not.toMatch(/^src\/(client\/kvb-client|server\/(?!server-config)|store\/|auth\/)/);
    // Each other built-in (node:http, crypto, child_process, fs/promises…) costs every `kvb` run
    // milliseconds of start-up: a command loads it with `await import()` when it needs it.
    for (const name of packages) expect(name).toMatch(/^(node:(fs|os|path|buffer)$|commander$|@commander-js\/extra-typings$)/);
  });
});
