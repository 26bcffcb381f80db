/** Child processes for the bench: spawn, wait until they answer, sample their memory, stop. */
import { type ChildProcess, spawn } from 'node:child_process';
import { accessSync, constants, openSync, readFileSync, readdirSync } from 'node:fs';
import { request } from 'node:http';
import { createServer } from 'node:net';

export interface Service {
  name: string;
  /** Every process that makes up the service (webdis counts its Redis too). */
  children: ChildProcess[];
  stop(): Promise<void>;
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** One HTTP request; resolves with the status and body, or rejects when nothing answers. */
export function httpRequest(
  url: string,
  options: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: options.method ?? 'GET', headers: options.headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(options.body);
  });
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `url` until it answers 200; returns the milliseconds waited. */
export async function waitForOk(url: string, timeoutMs = 30_000, pollMs = 2): Promise<number> {
  const start = performance.now();
  for (;;) {
    try {
      if ((await httpRequest(url)).status === 200) return performance.now() - start;
    } catch {
      // not listening yet
    }
    if (performance.now() - start > timeoutMs) throw new Error(`${url} did not answer 200 within ${timeoutMs} ms`);
    await sleep(pollMs);
  }
}

/** Spawns a long-running process whose output goes to `logFile`. */
export function spawnLogged(command: string, args: string[], logFile: string, env?: NodeJS.ProcessEnv): ChildProcess {
  const fd = openSync(logFile, 'a');
  const child = spawn(command, args, { stdio: ['ignore', fd, fd], env: { ...process.env, ...env } });
  child.on('error', () => undefined);
  return child;
}

/** Sends SIGTERM and waits for the exit; SIGKILL after `graceMs`. */
export async function stopChild(child: ChildProcess, graceMs = 10_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

/**
 * Resident memory of a process in bytes (Linux), or 0 when it is gone: all of it (VmRSS), and its
 * anonymous part (RssAnon: heap and stacks, without file-backed pages such as a memory-mapped
 * database file, which are the OS page cache).
 */
export function memoryBytes(pid: number | undefined): { rss: number; anon: number } {
  if (pid === undefined) return { rss: 0, anon: 0 };
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kB = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB$`, 'm').exec(status)?.[1] ?? 0) * 1024;
    return { rss: kB('VmRSS'), anon: kB('RssAnon') };
  } catch {
    return { rss: 0, anon: 0 };
  }
}

export function serviceMemory(service: Service): { rss: number; anon: number } {
  return service.children.reduce(
    (sum, child) => {
      const m = memoryBytes(child.pid);
      return { rss: sum.rss + m.rss, anon: sum.anon + m.anon };
    },
    { rss: 0, anon: 0 },
  );
}

/** Samples a service's memory every `everyMs` until stopped; returns the peaks of RSS and of RssAnon. */
export function sampleRss(service: Service, everyMs = 250): { stop(): { rss: number; anon: number } } {
  const peak = serviceMemory(service);
  const sample = () => {
    const now = serviceMemory(service);
    peak.rss = Math.max(peak.rss, now.rss);
    peak.anon = Math.max(peak.anon, now.anon);
  };
  const timer = setInterval(sample, everyMs);
  return {
    stop() {
      clearInterval(timer);
      sample();
      return peak;
    },
  };
}

/** Whether an executable is on the PATH. */
export function onPath(command: string): boolean {
  const dirs = (process.env.PATH ?? '').split(':');
  return dirs.some((dir) => {
    try {
      accessSync(`${dir}/${command}`, constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

/**
 * CPU time (user + system) a process has used so far, in milliseconds (Linux), or 0 when it is
 * gone; given `thread`, that thread's alone (a process's main thread has its pid as thread id).
 */
export function cpuMs(pid: number | undefined, thread?: number): number {
  if (pid === undefined) return 0;
  try {
    const stat = readFileSync(thread === undefined ? `/proc/${pid}/stat` : `/proc/${pid}/task/${thread}/stat`, 'utf8');
    // Fields after the parenthesised command name; utime and stime are the 12th and 13th of them.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS;
  } catch {
    return 0;
  }
}

/** Linux reports CPU time in clock ticks of 1/100 s on every common platform. */
const CLOCK_TICKS = 100;

/**
 * CPU time (user + system) every PostgreSQL server process on this machine has used so far, in
 * milliseconds (Linux): the processes named `postgres` in /proc. A backend that exits between two
 * samples takes its time with it, so compare samples around work done on long-lived connections
 * (kvb's pool), on a server nothing else uses.
 */
export function postgresCpuMs(): number {
  let sum = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/comm`, 'utf8').trim() === 'postgres') sum += cpuMs(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return sum;
}

export function serviceCpuMs(service: Service): number {
  return service.children.reduce((sum, child) => sum + cpuMs(child.pid), 0);
}

/** CPU time of the service's request thread: its first process's main thread (kvb's HTTP server runs there). */
export function requestThreadCpuMs(service: Service): number {
  const pid = service.children[0]?.pid;
  return cpuMs(pid, pid);
}
