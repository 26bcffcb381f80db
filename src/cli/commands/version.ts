import { VERSION } from '../../version.js';
import { defineCommand, examples } from '../define-command.js';
import { json, line } from '../output.js';
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
When no server answers, prints the client's version alone, with the reason on
stderr, and exits with the error's code (4 when the server is unreachable), so
a script can tell. (kvb --version prints the client's version only, exit 0.)
${examples('kvb version', 'kvb --url https://kv.example.com version --json')}`,
      ),
  async run(options, command) {
    await withClient(command, async ({ client }) => {
      let server: string | null = null;
      let failure: unknown;
      try {
        server = (await client.health()).version;
      } catch (err) {
        failure = err;
      }
      if (options.json) {
        await json({ client: VERSION, server, url: client.url });
      } else {
        await line(`client ${VERSION}`);
        if (server !== null) await line(`server ${server} (${client.url})`);
      }
      // The client's version is out; the failure, with its exit code, is main.ts's to report.
      if (server === null) {
        if (failure instanceof Error) failure.message = `no server version: ${failure.message}`;
        throw failure;
      }
    });
  },
});
