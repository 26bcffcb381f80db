import type { Command } from 'commander';
import { pipe, stdoutIsTty, table } from '../output.js';
import { networkErrorFor } from '../../client/client-errors.js';
import { withClient } from '../session.js';

interface LsOptions {
  limit?: number;
  skip?: number;
  reverse?: boolean;
  values?: boolean;
  format?: 'table' | 'text' | 'json' | 'jsonl';
}

/** Splits one jsonl line `["key",value]` into the key and the value's exact JSON text. */
function splitPair(lineText: string): [string, string] {
  const [key] = JSON.parse(lineText) as [string];
  const raw = lineText.slice(1 + JSON.stringify(key).length + 1, -1);
  const value = raw.startsWith('"') ? (JSON.parse(raw) as string) : raw;
  return [key, value];
}

/** `kvb ls [PREFIX]`: a table for people, the server's own formats (streamed) for scripts. */
export async function ls(prefix: string | undefined, options: LsOptions, command: Command): Promise<void> {
  await withClient(command, async ({ client, bucket }) => {
    const format = options.format ?? (stdoutIsTty() ? 'table' : 'text');
    const query = { prefix, limit: options.limit, skip: options.skip, reverse: options.reverse, values: options.values };
    const id = bucket();
    if (format !== 'table') {
      const body = await client.list(id, { ...query, format });
      // A connection lost mid-listing is still a network failure (exit 4), not a crash.
      await pipe(body).catch((err: unknown) => {
        throw networkErrorFor(client.url, err);
      });
      return;
    }
    // A table is for people (and bounded by --limit): read it whole, then lay it out.
    const body = await client.list(id, { ...query, format: 'jsonl' });
    const chunks: Buffer[] = [];
    try {
      for await (const chunk of body) chunks.push(chunk as Buffer);
    } catch (err) {
      throw networkErrorFor(client.url, err);
    }
    const rows = Buffer.concat(chunks)
      .toString('utf8')
      .split('\n')
      .filter((lineText) => lineText !== '')
      .map((lineText) => (options.values ? splitPair(lineText) : [JSON.parse(lineText) as string]));
    await table(options.values ? ['key', 'value'] : ['key'], rows);
  });
}
