import { Command } from '@commander-js/extra-typings';
import { describe, expect, it } from 'vitest';
import { type ParentCommand, declareGlobalOptions } from '../../src/cli/define-command.js';
import { COMMANDS, buildProgram, commandToRun } from '../../src/cli/program.js';

const root = () => declareGlobalOptions(new Command('kvb').version('0', '-V, --version')) as unknown as ParentCommand;
const names = (program: { commands: ReadonlyArray<{ name(): string }> }) => program.commands.map((c) => c.name());

describe('the CLI defines only the command it runs', () => {
  it('each command is registered under the name its own definition gives it', () => {
    for (const [name, command] of Object.entries(COMMANDS)) {
      const parent = root();
      command.register(parent);
      expect(names(parent), name).toEqual([name]);
    }
  });

  it('the command is found past the global options and their values', () => {
    const program = root();
    const cases: Array<[string[], string | undefined]> = [
      [['get', 'k'], 'get'],
      [['--url', 'http://127.0.0.1:8080', '--bucket', 'get', 'get', 'k'], 'get'],
      [['--profile', 'serve', '--timeout', '5', 'ls'], 'ls'],
      [['--url=http://127.0.0.1:8080', '-q', 'set', 'k', 'v'], 'set'],
      [['bucket', 'show'], 'bucket'],
      [['mint-token', '--prefix', 'p/'], 'mint-token'],
    ];
    for (const [args, command] of cases) expect(commandToRun(program, args), args.join(' ')).toBe(command);
  });

  it('anything else defines every command: no command, help, an unknown name or option, completion, a missing value', () => {
    const program = root();
    for (const args of [
      [],
      ['--help'],
      ['-V'],
      ['help', 'get'],
      ['gett', 'k'],
      ['--nope', 'get'],
      ['completion', 'bash'],
      ['--url'],
      ['--', 'get'],
    ]) {
      expect(commandToRun(program, args), args.join(' ')).toBeUndefined();
    }
  });

  it('buildProgram with argv defines just that command; without, all of them in help order', () => {
    expect(names(buildProgram(['node', 'kvb', '--bucket', 'b', 'get', 'k']))).toEqual(['get']);
    expect(names(buildProgram(['node', 'kvb', 'gett']))).toEqual(Object.keys(COMMANDS));
    expect(names(buildProgram())).toEqual(Object.keys(COMMANDS));
  });
});
