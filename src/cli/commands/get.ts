import type { Command } from 'commander';
import { data, line, stdoutIsTty } from '../output.js';
import { withClient } from '../session.js';

/** `kvb get KEY`: the value's exact bytes, or `--json` for `{key, type, value, expires_at}`. */
export async function get(key: string, options: { json?: boolean }, command: Command): Promise<void> {
  await withClient(command, async ({ client, bucket }) => {
    const value = await client.get(bucket(), key);
    if (options.json) {
      const { valueAsJson } = await import('../../values/list-format.js');
      // The listing's own rendering: JSON and numbers keep their exact text (no float rounding of
      // 2^63-1), bytes become base64. A server that names no type gets its value as a string.
      const rendered = value.type ? valueAsJson({ type: value.type, data: value.data }) : JSON.stringify(value.data.toString('utf8'));
      await line(
        `{"key":${JSON.stringify(key)},"type":${JSON.stringify(value.type ?? null)},"value":${rendered},"expires_at":${JSON.stringify(value.expiresAt ?? null)}}`,
      );
      return;
    }
    await data(value.data);
    // People at a terminal get their prompt back on its own line; pipes get the exact bytes.
    if (stdoutIsTty() && value.type !== 'bytes' && !value.data.toString('utf8').endsWith('\n')) await data('\n');
  });
}
