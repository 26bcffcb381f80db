import type { Command } from 'commander';
import { completionScript } from '../completion-script.js';
import { data } from '../output.js';

/** `kvb completion bash|zsh|fish`: prints a completion script generated from the command tree. */
export async function completion(shell: 'bash' | 'zsh' | 'fish', _options: unknown, command: Command): Promise<void> {
  let root = command;
  while (root.parent) root = root.parent;
  await data(completionScript(root, shell));
}
