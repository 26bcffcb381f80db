import { Argument } from '@commander-js/extra-typings';
import { defineCommand, examples, integer, keyArgument } from '../define-command.js';
import { info } from '../output.js';
import { withClient } from '../session.js';
import { MAX_TTL_SECONDS } from '../../limits.js';
import { EXIT_CODES } from '../../errors.js';

/** Not live: exit 2, like `kvb get` of a missing key. */
class NoSuchKeyError extends Error {
  readonly exitCode = EXIT_CODES.notFound;
}

/** `kvb expire KEY SECONDS`: a new expiry without rewriting the value (one revision); 0 removes the expiry. */
export const expire = defineCommand({
  define: (parent) =>
    parent
      .command('expire')
      .description("change a key's expiry without rewriting its value (0: never expires)")
      .addArgument(keyArgument('the key'))
      .addArgument(
        new Argument('<seconds>', 'seconds from now until it expires; 0 removes the expiry').argParser(
          integer('SECONDS', 0, MAX_TTL_SECONDS),
        ),
      )
      .addHelpText(
        'after',
        `
One revision: watchers see one set event carrying the same value and the new
expiry. Exits 2 when the key does not exist (or has already expired). Read the
expiry back with kvb ttl KEY.
${examples('kvb expire session/42 3600', 'kvb expire config 0   # never expires', 'kvb ttl session/42')}`,
      ),
  async run(key, seconds, _options, command) {
    const { expire: expireKey } = await import('../../client/bucket-primitives.js');
    await withClient(command, async ({ client, bucket }) => {
      if (!(await expireKey(client, bucket(), key, seconds))) throw new NoSuchKeyError(`no such key: ${JSON.stringify(key)}`);
      info(seconds === 0 ? `${key} never expires` : `${key} expires in ${seconds}s`);
    });
  },
});
