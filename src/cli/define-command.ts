import { Argument, type Command, InvalidArgumentError, Option, type OptionValues } from '@commander-js/extra-typings';
import type { WriteCondition } from '../client/kvb-http.js';
import { UsageError } from './usage-error.js';

/**
 * How a kvb command is written: its definition (name, arguments, options, help) and its handler
 * side by side, with the handler's arguments and options typed from the definition by
 * @commander-js/extra-typings. Renaming `--ttl` in `define` makes every `options.ttl` in `run`
 * fail to compile.
 *
 * A command module is loaded at start-up (for `--help` and completion), so it imports only light
 * modules statically; whatever is heavy (the HTTP client, @clack/prompts, the
 * server) is reached with `await import()` inside `run`, or through session.ts / output.ts, which
 * already load them lazily.
 */

/** The global flags, declared once on the root command; `GlobalOptions` is their inferred type. */
export function declareGlobalOptions(program: Command) {
  return program
    .option('--url <url>', 'server URL (env KVB_URL; default http://127.0.0.1:8080)')
    .option('--bucket <id>', 'bucket id (env KVB_BUCKET)')
    .option('--token <token>', 'credential sent as Authorization: Bearer (env KVB_TOKEN)')
    .option('--profile <name>', 'profile from the config file (env KVB_PROFILE; default "default")')
    .option('--ca <file>', 'trust the CA in this PEM file for an https:// server (a private CA; env KVB_CA)')
    .addOption(
      new Option('--timeout <seconds>', 'give up on a request after this many seconds (env KVB_TIMEOUT; default 30)').argParser(
        positiveSeconds('--timeout'),
      ),
    )
    .option('-q, --quiet', 'no messages on stderr (failures are still reported)');
}

export type GlobalOptions = ReturnType<ReturnType<typeof declareGlobalOptions>['opts']>;

/** A command that new commands are added to: the root, or a group such as `bucket`. */
export type ParentCommand = Command<[], Record<never, never>, GlobalOptions>;

/** The command object a handler receives; session.ts reads the global flags from it. */
export type RunningCommand = { optsWithGlobals(): GlobalOptions };

export interface CommandSpec<Args extends unknown[], Opts extends OptionValues> {
  /** Declares the command on `parent`: `parent.command('name').argument(…).option(…)`. */
  define(parent: ParentCommand): Command<Args, Opts, GlobalOptions>;
  /** Runs the command with the arguments and options `define` declared (commander's order). */
  run(...args: [...Args, Opts, Command<Args, Opts, GlobalOptions>]): Promise<void>;
}

export interface CommandModule {
  register(parent: ParentCommand): void;
}

/** Pairs a definition with its handler; see the comment at the top of this file. */
export function defineCommand<Args extends unknown[], Opts extends OptionValues>(spec: CommandSpec<Args, Opts>): CommandModule {
  return {
    register(parent) {
      spec.define(parent).action(spec.run);
    },
  };
}

/** A group of subcommands (`kvb bucket show|update|…`): declares the group, then registers each. */
export function defineGroup(define: (parent: ParentCommand) => ParentCommand, subcommands: CommandModule[]): CommandModule {
  return {
    register(parent) {
      const group = define(parent);
      for (const sub of subcommands) sub.register(group);
    },
  };
}

/**
 * Points an unknown flag that people reach for to what does the job, instead of commander's
 * nearest spelling (`kvb get --prefix` would otherwise suggest --profile). Only these flags change;
 * every other unknown one keeps commander's message. `hints` maps a flag to the advice.
 */
export function withOptionHints<C extends Command<unknown[], OptionValues, OptionValues>>(command: C, hints: Record<string, string>): C {
  const target = command as unknown as { unknownOption(flag: string): void; error(message: string, options: { code: string }): never };
  const unknown = target.unknownOption.bind(target);
  target.unknownOption = (flag: string) => {
    const hint = hints[flag.split('=')[0]!];
    if (hint !== undefined)
      target.error(`error: unknown option '${flag}' for '${command.name()}': ${hint}`, { code: 'commander.unknownOption' });
    unknown(flag);
  };
  return command;
}

/** An option-argument parser for an integer in [min, max]; the message names the flag. */
export function integer(flag: string, min: number, max: number) {
  return (value: string): number => {
    if (!/^\d+$/.test(value) || Number(value) < min || Number(value) > max) {
      throw new InvalidArgumentError(`${flag} must be an integer from ${min} to ${max}`);
    }
    return Number(value);
  };
}

/** A parser for a positive number of seconds (fractions allowed, at most a day). */
export function positiveSeconds(flag: string) {
  return (value: string): number => {
    const n = Number(value);
    if (!/^\d+(\.\d+)?$/.test(value) || !(n > 0) || n > 86400)
      throw new InvalidArgumentError(`${flag} must be a number of seconds above 0, at most 86400`);
    return n;
  };
}

/** A `<key>` argument: an empty key is refused here, in words, rather than by the server's 405 for `/api/v1/B/`. */
export function keyArgument(description: string) {
  return new Argument('<key>', description).argParser((value: string) => {
    // A UsageError (not InvalidArgumentError) so the message is just the reason: `kvb: a key must not be empty`.
    if (value === '') throw new UsageError('a key must not be empty');
    return value;
  });
}

/** The "Examples:" block that ends most help texts. */
export const examples = (...lines: string[]): string => `\nExamples:\n${lines.map((l) => `  ${l}`).join('\n')}`;

/**
 * The compare-and-set flags of `kvb set`, `del` and `incr`: the write applies only at a revision
 * (`If-Match: "N"`), only to an absent key (`If-None-Match: *`) or only to a live one (`If-Match: *`).
 * A refused write exits 6.
 */
export function withConditionOptions<Args extends unknown[], Opts extends OptionValues, G extends OptionValues>(
  command: Command<Args, Opts, G>,
) {
  return command
    .addOption(
      new Option('--if-rev <n>', 'only if the key is live at revision N (see kvb get --json)')
        .argParser(integer('--if-rev', 0, Number.MAX_SAFE_INTEGER))
        .conflicts(['ifAbsent', 'ifExists']),
    )
    .addOption(new Option('--if-absent', 'only if the key does not exist (or has expired)').conflicts('ifExists'))
    .addOption(new Option('--if-exists', 'only if the key exists'));
}

/** The client's write condition from the flags of withConditionOptions. */
export function writeCondition(options: {
  ifRev?: number | undefined;
  ifAbsent?: true | undefined;
  ifExists?: true | undefined;
}): WriteCondition {
  return { ifRevision: options.ifRev, ifAbsent: options.ifAbsent === true, ifExists: options.ifExists === true };
}
