import { type ResultPromise, execa } from 'execa';
import { mkdtempSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { KVB_BIN } from './server.js';
import type { StreamEvent } from './watch-stream.js';

export interface CliResult {
  exitCode: number;
  /** Exact bytes written to stdout. */
  stdout: Buffer;
  /** stdout as UTF-8. */
  out: string;
  stderr: string;
}

export interface CliOptions {
  /** Variables for the child; `undefined` removes one. KVB_* from the parent are always removed. */
  env?: Record<string, string | undefined>;
  /** Bytes on stdin; without it stdin is /dev/null (not a TTY, empty). */
  input?: string | Buffer;
  /** XDG_CONFIG_HOME for the child; a fresh empty one by default. */
  configHome?: string;
}

/** A fresh, empty XDG_CONFIG_HOME. */
export const tempConfigHome = (): string => mkdtempSync(join(tmpdir(), 'kvb-cli-config-'));

const CLEARED = Object.fromEntries(
  Object.keys(process.env)
    .filter((k) => k.startsWith('KVB_'))
    .map((k) => [k, undefined]),
);

const childEnv = (options: CliOptions) => ({
  ...CLEARED,
  NO_COLOR: undefined,
  XDG_CONFIG_HOME: options.configHome ?? tempConfigHome(),
  ...options.env,
});

/** Runs the real `bin/kvb` as a child process (`node bin/kvb …`) and collects bytes, text and exit code. */
export async function kvb(args: string[], options: CliOptions = {}): Promise<CliResult> {
  const result = await execa('node', [KVB_BIN, ...args], {
    env: childEnv(options),
    extendEnv: true,
    reject: false,
    encoding: 'buffer',
    stripFinalNewline: false,
    timeout: 20_000,
    ...(options.input !== undefined ? { input: options.input } : { stdin: 'ignore' as const }),
  });
  const stdout = Buffer.from(result.stdout as Uint8Array);
  return {
    exitCode: result.exitCode ?? -1,
    stdout,
    out: stdout.toString('utf8'),
    stderr: Buffer.from(result.stderr as Uint8Array).toString('utf8'),
  };
}

export interface RunningCli {
  child: ResultPromise;
  /** stdout so far, as UTF-8. */
  out(): string;
  /** stderr so far. */
  err(): string;
  /** stdout's complete lines so far, each parsed as JSON (for `--format jsonl` and pipes). */
  events(): StreamEvent[];
  /** Sends `signal` (SIGINT by default, Ctrl-C) and waits for the exit; returns the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | undefined>;
}

/** Starts a long-running `bin/kvb` command (`watch`, `lock`) and collects its output as it comes. */
export function kvbRunning(args: string[], options: Omit<CliOptions, 'input'> = {}): RunningCli {
  const child = execa('node', [KVB_BIN, ...args], {
    env: childEnv(options),
    extendEnv: true,
    reject: false,
    buffer: false,
    stdin: 'ignore',
  });
  let out = '';
  let err = '';
  child.stdout?.setEncoding('utf8').on('data', (c: string) => (out += c));
  child.stderr?.setEncoding('utf8').on('data', (c: string) => (err += c));
  return {
    child,
    out: () => out,
    err: () => err,
    // A line is complete once its newline arrived; the text after the last one may be half a line.
    events: () =>
      out
        .split('\n')
        .slice(0, -1)
        .filter(Boolean)
        .map((line) => JSON.parse(line) as StreamEvent),
    async stop(signal = 'SIGINT') {
      child.kill(signal);
      return (await child).exitCode;
    },
  };
}

export interface FakeServer {
  url: string;
  /** Every request seen: method, URL (path and query) and headers. */
  requests: Array<{ method: string; url: string; headers: IncomingMessage['headers'] }>;
  close(): Promise<void>;
}

/** A tiny HTTP server that answers every request with `status` and the spec's error envelope. */
export async function fakeServer(status: number, message: string): Promise<FakeServer> {
  const requests: FakeServer['requests'] = [];
  const server: Server = createServer((req, res) => {
    requests.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers });
    req.resume();
    res.writeHead(status, { 'content-type': 'application/json', 'kvb-error-detail': 'simulated failure' });
    res.end(JSON.stringify({ error: { code: status, message } }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${address.port}`,
    requests,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** A URL nothing listens on: a port that was just free. */
export async function deadUrl(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return `http://127.0.0.1:${port}`;
}

const PTY_SESSION = fileURLToPath(new URL('./pty-session.py', import.meta.url));

export const KEYS = { down: '\u001b[B', up: '\u001b[A', backspace: '\u007f', ctrlC: '\u0003', enter: '\r' } as const;

export interface TerminalStep {
  /** Wait until this text has been printed… */
  expect: string;
  /** …then type this. */
  send: string;
}

export interface TerminalResult {
  exitCode: number;
  /** Everything printed (stdout and stderr share the terminal), ANSI escapes removed. */
  output: string;
  /** The same, escapes kept. */
  raw: string;
  /** The text a step waited for in vain, or null. */
  timedOut: string | null;
}

/**
 * Runs the real `bin/kvb` in a pseudo-terminal (python3's pty module), typing each step's keys
 * when its text appears. stdin, stdout and stderr are all the terminal.
 */
export async function inTerminal(
  args: string[],
  steps: TerminalStep[],
  env: Record<string, string>,
  /** Called once step N's keys are typed into the terminal. */
  onSent?: (step: number) => void,
  /** The kvb to run: this checkout's by default, or an installed one (`['kvb']` with its PATH in env). */
  command: string[] = ['node', KVB_BIN],
): Promise<TerminalResult> {
  const child = execa('python3', [PTY_SESSION, JSON.stringify(steps), '--', ...command, ...args], {
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/tmp', TERM: 'xterm-256color', ...env },
    extendEnv: false,
    timeout: 60_000,
  });
  let pending = '';
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    const lines = (pending + chunk).split('\n');
    pending = lines.pop()!;
    for (const line of lines) if (line.startsWith('sent ')) onSent?.(Number(line.slice(5)));
  });
  const { stdout } = await child;
  return JSON.parse(stdout) as TerminalResult;
}
