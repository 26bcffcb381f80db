import { Argument, type CommandUnknownOpts } from '@commander-js/extra-typings';
import { defineCommand, examples } from '../define-command.js';
import { data } from '../output.js';

/** `kvb completion bash|zsh|fish`: prints a completion script generated from the command tree. */
export const completion = defineCommand({
  define: (parent) =>
    parent
      .command('completion')
      .description('print a shell completion script (bash, zsh or fish)')
      .addArgument(new Argument('<shell>', 'the shell').choices(['bash', 'zsh', 'fish'] as const))
      .addHelpText(
        'after',
        `
The same scripts ship in completions/ (kvb.bash, _kvb, kvb.fish).
${examples(
  'source <(kvb completion bash)              # in ~/.bashrc',
  'kvb completion zsh > "${fpath[1]}/_kvb"',
  'kvb completion fish > ~/.config/fish/completions/kvb.fish',
)}`,
      ),
  async run(shell, _options, command) {
    const { completionScript } = await import('../completion-script.js');
    let root: CommandUnknownOpts = command;
    while (root.parent) root = root.parent;
    await data(completionScript(root, shell));
  },
});
