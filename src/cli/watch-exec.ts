/**
 * `kvb watch --exec CMD`: runs CMD once per change, in order, each after the previous one has
 * exited (like `consul watch -type=keyprefix <handler>`). The event is the command's stdin (one
 * JSON line, as `--format jsonl` prints it) and is also in its environment.
 */
import type { ChildProcess } from 'node:child_process';
import { warn } from './output.js';

export interface ExecEvent {
  type: string;
  key?: string;
  rev?: number;
  value?: unknown;
  value_type?: string;
  expires_at?: string | null;
}

/** The environment a handler gets for one event (besides the caller's own). */
export function eventEnvironment(e: ExecEvent, line: string): Record<string, string> {
  const env: Record<string, string> = {
    KVB_OP: e.type,
    KVB_KEY: e.key ?? '',
    KVB_REVISION: String(e.rev ?? ''),
    KVB_EVENT: line,
  };
  if (e.value_type !== undefined) env.KVB_VALUE_TYPE = e.value_type;
  if (e.type === 'set') env.KVB_EXPIRES_AT = e.expires_at ?? '';
  // With --values: text as is, every other type as its JSON text (int64 a decimal string's contents, bytes base64).
  if (e.value !== undefined) env.KVB_VALUE = typeof e.value === 'string' ? e.value : JSON.stringify(e.value);
  // An environment variable cannot hold U+0000 (a key or text value may): such a variable is left
  // out and named in KVB_OMITTED; the event on stdin and in KVB_EVENT is JSON, where it is \u0000.
  const omitted = Object.keys(env).filter((name) => env[name]!.includes('\u0000'));
  for (const name of omitted) delete env[name];
  if (omitted.length > 0) env.KVB_OMITTED = omitted.join(',');
  return env;
}

/** Runs the handler for one event through `sh -c` and waits for it; a failing handler is reported, never fatal. */
export async function runHandler(command: string, e: ExecEvent, line: string): Promise<void> {
  const { spawn } = await import('node:child_process');
  return new Promise((resolve) => {
    const env = eventEnvironment(e, line);
    if (env.KVB_OMITTED !== undefined) {
      warn(
        `--exec: ${env.KVB_OMITTED} of ${e.type} ${JSON.stringify(e.key)} at revision ${e.rev} contains U+0000, which the environment cannot carry; left out (the event on stdin and in KVB_EVENT has it)`,
      );
    }
    let child: ChildProcess;
    try {
      child = spawn('/bin/sh', ['-c', command], { stdio: ['pipe', 'inherit', 'inherit'], env: { ...process.env, ...env } });
    } catch (err) {
      // Thrown, not emitted: it must be reported as this change's, not taken for a dropped connection.
      warn(`--exec could not run for ${e.type} ${JSON.stringify(e.key)} at revision ${e.rev}: ${(err as Error).message}`);
      return resolve();
    }
    child.once('error', (err) => {
      warn(`--exec could not run: ${err.message}`);
      resolve();
    });
    // A handler that does not read its stdin must not fail the watch.
    child.stdin!.on('error', () => {});
    child.stdin!.end(`${line}\n`);
    child.once('exit', (code, signal) => {
      if (code !== 0) warn(`--exec exited ${code ?? signal} for ${e.type} ${JSON.stringify(e.key)} at revision ${e.rev}`);
      resolve();
    });
  });
}
