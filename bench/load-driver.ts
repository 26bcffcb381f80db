/** The bench's side of the load generator: forks it, and runs one workload at a time through it. */
import { fork } from 'node:child_process';
import { join } from 'node:path';
import type { LoadJob, LoadResult } from './load-generator.js';
import type { Workload } from './workloads.js';

const ROOT = new URL('..', import.meta.url).pathname;

export interface LoadDriver {
  /** Drives `workload` against `url` (or each of several instances at once) for `seconds` (nothing unmeasured before it). */
  load(url: string | string[], workload: Workload, seconds: number): Promise<LoadResult>;
  stop(): void;
}

/** A forked load generator, so autocannon never shares an event loop with what it measures. */
export function forkLoadDriver(connections: number, pipelining: number): LoadDriver {
  const generator = fork(join(ROOT, 'bench/load-generator.ts'), [], { execArgv: ['--import', 'tsx'], stdio: 'inherit' });
  let nextJob = 0;
  return {
    load(url, workload, seconds) {
      const job: LoadJob = {
        id: nextJob++,
        urls: typeof url === 'string' ? [url] : url,
        plan: workload.plan,
        ...(workload.keySpace && { keySpace: workload.keySpace }),
        connections,
        pipelining,
        seconds,
        warmupSeconds: 0,
      };
      return new Promise((resolve, reject) => {
        const onExit = (code: number | null) => reject(new Error(`the load generator exited (${code})`));
        const onMessage = (result: LoadResult) => {
          if (result.id !== job.id) return;
          generator.off('message', onMessage);
          generator.off('exit', onExit);
          resolve(result);
        };
        generator.on('message', onMessage);
        generator.once('exit', onExit);
        generator.send(job);
      });
    },
    stop: () => generator.kill(),
  };
}
