import { VERSION } from '../../version.js';
import { defineCommand, examples } from '../define-command.js';
import { json, line, warn } from '../output.js';
import { withClient } from '../session.js';

/** `kvb version`: the client's version, and the server's from /health when one answers. */
export const version = defineCommand({
  define: (parent) =>
    parent
      .command('version')
      .description("print the client's version and the server's (from /health)")
      .option('--json', 'print {"client","server","url"} (server is null when none answered)')
      .addHelpText(
        'after',
        `
When no server answers, prints the client's version alone, with a note on
stderr, and still exits 0. (kvb --version prints the client's version only.)
${examples('kvb version', 'kvb --url https://kv.example.com version --json')}`,
      ),
  async run(options, command) {
    await withClient(command, async ({ client }) => {
      let server: string | null = null;
      let why = '';
      try {
        server = (await client.health()).version;
      } catch (err) {
        why = (err as Error).message;
      }
      if (options.json) {
        await json({ client: VERSION, server, url: client.url });
      } else {
        await line(`client ${VERSION}`);
        if (server !== null) await line(`server ${server} (${client.url})`);
      }
      if (server === null) warn(`no server version: ${why}`);
    });
  },
});
