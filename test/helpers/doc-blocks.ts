import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** A fenced code block of a docs page. */
export interface DocBlock {
  page: string;
  lang: string;
  /** The line number of the block's first line of code. */
  line: number;
  text: string;
  /**
   * The word of a `<!-- docs-test: WORD -->` line just above the block: `run` (run against a spawned
   * server by test/cli/docs-pages.test.ts), `install` (run from a packed tarball in a scratch
   * directory by the packaging tests) or `first-use` (the README's tour of the server and the CLI,
   * run with the kvb that docs/operations.md's install put on the PATH, by
   * test/packaging/global-install.test.ts); undefined when there is none.
   */
  marker: string | undefined;
}

/** The fenced code blocks of a page (a path under root), in order; throws on a block never closed. */
export function docBlocks(root: string, page: string): DocBlock[] {
  const found: DocBlock[] = [];
  let open: DocBlock | undefined;
  const lines = readFileSync(join(root, page), 'utf8').split('\n');
  lines.forEach((line, i) => {
    if (!line.startsWith('```')) {
      if (open) open.text += `${line}\n`;
    } else if (open) {
      found.push(open);
      open = undefined;
    } else {
      const marker = /^<!-- docs-test: (\S+) -->$/.exec(lines[i - 1] ?? '')?.[1];
      open = { page, lang: line.slice(3).trim(), line: i + 2, text: '', marker };
    }
  });
  if (open) throw new Error(`${page}: the code block at line ${open.line - 1} is never closed`);
  return found;
}

/**
 * The comments after commands (`node first-use.mjs   # hello`): what those commands print, in order.
 * A whole-line comment says something about the block and is not one of them.
 */
export function expectedOutput(text: string): string[] {
  return [...text.matchAll(/^[^#\n]*\S[ \t]+# (.+)$/gm)].map((m) => m[1]!.trim());
}
