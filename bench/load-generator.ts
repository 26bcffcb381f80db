/**
 * The load generator, forked by the bench so autocannon never shares the server's event loop.
 * It receives one job at a time over IPC and answers with the measured figures.
 */
import autocannon from 'autocannon';

/** One HTTP request of a plan; the plan is cycled through, one request after another. */
export interface PlannedRequest {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  path: string;
  headers?: Record<string, string>;
  body?: string;
}

/**
 * Spread requests over a key space: `{n}` in a planned path becomes a key number, consecutive
 * (0, 1, 2, ...) or uniformly random in [0, size).
 */
export interface KeySpace {
  size: number;
  random: boolean;
}

export interface LoadJob {
  id: number;
  url: string;
  plan: PlannedRequest[];
  keySpace?: KeySpace;
  connections: number;
  pipelining: number;
  seconds: number;
  warmupSeconds: number;
}

export interface LoadResult {
  id: number;
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  total: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  statusCodes: Record<string, number>;
}

function run(job: LoadJob, seconds: number): Promise<autocannon.Result> {
  // One counter shared by every connection: consecutive requests go to consecutive keys,
  // whichever connection sends them (a per-connection cycle would send 50 copies of each key).
  let next = 0;
  const { plan, keySpace } = job;
  return autocannon({
    url: job.url,
    connections: job.connections,
    pipelining: job.pipelining,
    duration: seconds,
    requests: [
      {
        setupRequest: (request) => {
          const i = next++;
          const planned = plan[i % plan.length]!;
          let path = planned.path;
          if (keySpace) path = path.replace('{n}', String(keySpace.random ? Math.floor(Math.random() * keySpace.size) : i % keySpace.size));
          return { ...request, method: planned.method, path, headers: planned.headers ?? {}, body: planned.body ?? '' };
        },
      },
    ],
  });
}

process.on('message', async (message: LoadJob) => {
  if (message.warmupSeconds > 0) await run(message, message.warmupSeconds);
  const result = await run(message, message.seconds);
  const statusCodes: Record<string, number> = {};
  for (const [code, stats] of Object.entries(result.statusCodeStats ?? {})) statusCodes[code] = (stats as { count: number }).count;
  const reply: LoadResult = {
    id: message.id,
    requestsPerSecond: result.requests.total / result.duration,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    total: result.requests.total,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    statusCodes,
  };
  process.send!(reply);
});
