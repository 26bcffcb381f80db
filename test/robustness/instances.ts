import { type ChildProcess, spawn } from 'node:child_process';
import { appendFileSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { WebSocket } from 'undici';
import type { ProcessLife } from './history.js';
import { now } from './recorder.js';

/**
 * The kvb instances of one scenario: the built `bin/kvb serve`, spawned the way
 * test/helpers/server.ts spawns it, but on a fixed port chosen once, so an instance killed with
 * SIGKILL comes back at the same URL and its clients follow it without being told.
 */

/** The kvb to run: this checkout's build, or another's (KVB_ROBUSTNESS_BIN=/path/to/bin/kvb) to check another build. */
const KVB_BIN = process.env.KVB_ROBUSTNESS_BIN || fileURLToPath(new URL('../../bin/kvb', import.meta.url));

/** KVB_ROBUSTNESS_LOG_DIR=DIR: every instance's whole output (warnings and up) appended to DIR/<instance>.log. */
const LOG_DIR = process.env.KVB_ROBUSTNESS_LOG_DIR;

/** Every child this process started, so an interrupted run can kill them all (see killAll). */
const children = new Set<ChildProcess>();

/** A free TCP port on 127.0.0.1 (the kernel's pick, released at once). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

export class Instance {
  readonly url: string;
  private child: ChildProcess | undefined;
  private output = '';
  paused = false;
  /** Each of its processes, spawned and seen gone (`now()`, the recorder's clock): see RecordedHistory.lives. */
  readonly lives: ProcessLife[] = [];

  constructor(
    readonly name: string,
    readonly port: number,
    /** The `--db` value. */
    readonly db: string,
    readonly args: string[],
    /** Environment beyond the runner's own (settings that have no flag). */
    readonly env: Record<string, string> = {},
  ) {
    this.url = `http://127.0.0.1:${port}`;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  get running(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  /** The last lines the process printed (for a report when something goes wrong). */
  logTail(lines = 20): string {
    return this.output.split('\n').slice(-lines).join('\n');
  }

  /** Starts `kvb serve` and resolves once it listens. */
  async start(): Promise<void> {
    const child = spawn(
      process.execPath,
      // SIGUSR1 opens the inspector on a port of the kernel's choosing (see javascriptStack).
      ['--inspect-port=127.0.0.1:0', KVB_BIN, 'serve', '--port', String(this.port), '--host', '127.0.0.1', '--db', this.db, ...this.args],
      {
        env: { ...process.env, KVB_LOG_LEVEL: 'warn', ...this.env },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    children.add(child);
    const life: ProcessLife = { started: now() };
    this.lives.push(life);
    child.once('exit', () => {
      children.delete(child);
      life.exited = now();
    });
    this.child = child;
    this.paused = false;
    // Keep only the tail: a long soak must not grow this without bound.
    const keep = (chunk: Buffer) => {
      this.output = (this.output + chunk.toString('utf8')).slice(-20_000);
      if (LOG_DIR) appendFileSync(join(LOG_DIR, `${this.name}.log`), chunk);
    };
    child.stdout!.on('data', keep);
    child.stderr!.on('data', keep);
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(async () => {
        // What each of its threads was doing, read before the kill: where a start-up hangs.
        const threads = child.pid === undefined ? 'no pid' : threadStates(child.pid);
        const stack = await this.javascriptStack(child);
        child.kill('SIGKILL');
        reject(
          new Error(`instance ${this.name} did not start within 60 s (threads: ${threads}; main thread: ${stack}):\n${this.logTail()}`),
        );
      }, 60_000);
      const probe = setInterval(() => {
        // KVB_LOG_LEVEL=warn hides the "listening on" line: ask /health instead.
        fetch(`${this.url}/health`, { signal: AbortSignal.timeout(500) })
          .then((res) => {
            if (res.ok) {
              clearInterval(probe);
              clearTimeout(timer);
              resolve();
            }
          })
          .catch(() => {});
      }, 50);
      child.once('exit', (code, signal) => {
        clearInterval(probe);
        clearTimeout(timer);
        reject(new Error(`instance ${this.name} exited while starting (${code ?? signal}):\n${this.logTail()}`));
      });
    });
  }

  /**
   * Where the main thread's JavaScript is, for a start-up that hangs: SIGUSR1 opens the inspector
   * (it prints its address), and Debugger.pause interrupts running JavaScript to show its frames.
   */
  private async javascriptStack(child: ChildProcess): Promise<string> {
    child.kill('SIGUSR1');
    let address: string | undefined;
    for (let i = 0; i < 50 && !address; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      // The last one printed (SIGUSR1 opened it; the kept output is a 20 KB tail, so no offset into it holds).
      address = [...this.output.matchAll(/Debugger listening on (ws:\/\/\S+)/g)].at(-1)?.[1];
    }
    if (!address) return 'the inspector did not open within 5 s (native code?)';
    const socket = new WebSocket(address);
    const scripts = new Map<string, string>();
    const paused = new Promise<string>((resolve) => {
      socket.addEventListener('message', (event) => {
        const message = JSON.parse(String(event.data)) as {
          method?: string;
          params?: { scriptId: string; url: string; callFrames: CallFrame[] };
        };
        if (message.method === 'Debugger.scriptParsed') scripts.set(message.params!.scriptId, message.params!.url);
        if (message.method !== 'Debugger.paused') return;
        resolve(
          message
            .params!.callFrames.slice(0, 20)
            .map((f) => frameLine(f, scripts.get(f.location.scriptId)))
            .join('\n    '),
        );
      });
      socket.addEventListener('error', () => resolve('the inspector connection failed'));
    });
    await new Promise((resolve) => socket.addEventListener('open', resolve, { once: true }));
    socket.send(JSON.stringify({ id: 1, method: 'Debugger.enable' }));
    socket.send(JSON.stringify({ id: 2, method: 'Debugger.pause' }));
    const timeout = new Promise<string>((resolve) => setTimeout(() => resolve('no pause within 5 s (native code?)'), 5000));
    const stack = await Promise.race([paused, timeout]);
    socket.close();
    return stack;
  }

  /** kill -9, and wait until the process is gone. */
  async kill(): Promise<void> {
    const child = this.child;
    if (!child || !this.running) return;
    const gone = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await gone;
    this.paused = false;
  }

  pause(): void {
    if (this.running && !this.paused) {
      this.child!.kill('SIGSTOP');
      this.paused = true;
    }
  }

  resume(): void {
    if (this.running && this.paused) {
      this.child!.kill('SIGCONT');
      this.paused = false;
    }
  }

  /** SIGTERM (after SIGCONT, a stopped process cannot exit), SIGKILL after 10 s. */
  async stop(): Promise<void> {
    const child = this.child;
    if (!child || !this.running) return;
    this.resume();
    const gone = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await gone;
    clearTimeout(timer);
  }
}

/** A temp directory for an instance's SQLite file, removed by removeDataDirs. */
const dataDirs: string[] = [];
export function makeDataDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'kvb-robust-'));
  dataDirs.push(dir);
  return dir;
}
export function removeDataDirs(): void {
  for (const dir of dataDirs.splice(0)) rmSync(dir, { recursive: true, force: true });
}

/** SIGCONT then SIGKILL every child still alive: the exit path of an interrupted run. */
export function killAll(): void {
  for (const child of children) {
    try {
      child.kill('SIGCONT');
      child.kill('SIGKILL');
    } catch {
      // Already gone.
    }
  }
}

/** Each thread of a process as name:state:wchan (Linux /proc), or why they could not be read. */
interface CallFrame {
  functionName: string;
  url: string;
  location: { scriptId: string; lineNumber: number; columnNumber: number };
}

const frameLine = (f: CallFrame, url = f.url) =>
  `${f.functionName || '(anonymous)'} ${url}:${f.location.lineNumber + 1}:${f.location.columnNumber + 1}`;

function threadStates(pid: number): string {
  try {
    return readdirSync(`/proc/${pid}/task`)
      .map((tid) => {
        const read = (file: string) => {
          try {
            return readFileSync(`/proc/${pid}/task/${tid}/${file}`, 'utf8').trim();
          } catch {
            return '?';
          }
        };
        const state = /State:\s+(\S+)/.exec(read('status'))?.[1] ?? '?';
        return `${read('comm')}:${state}:${read('wchan')}`;
      })
      .join(', ');
  } catch (err) {
    return `unreadable (${(err as Error).message})`;
  }
}
