import { type Command, Argument } from 'commander';
import { data } from '../output.js';

/** `kvb completion bash|zsh|fish`: prints a completion script generated from the command tree. */
export function registerCompletion(program: Command): void {
  program
    .command('completion')
    .description('print a shell completion script (bash, zsh or fish)')
    .addArgument(new Argument('<shell>', 'the shell').choices(['bash', 'zsh', 'fish']))
    .addHelpText(
      'after',
      `
The same scripts ship in completions/ (kvb.bash, _kvb, kvb.fish).

Examples:
  source <(kvb completion bash)                       # in ~/.bashrc
  kvb completion zsh > "\${fpath[1]}/_kvb"
  kvb completion fish > ~/.config/fish/completions/kvb.fish`,
    )
    .action(async (shell: 'bash' | 'zsh' | 'fish', _options: unknown, command: Command) => {
      let root = command;
      while (root.parent) root = root.parent;
      const { completionScript } = await import('../completion-script.js');
      await data(completionScript(root, shell));
    });
}
