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
  /** Several: one instance each (of one database), the connections split evenly between them. */
  urls: string[];
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

/** The job's load on every URL at once, summed: rates and counts added, latencies the worst instance's. */
async function run(job: LoadJob, seconds: number) {
  // One counter shared by every connection: consecutive requests go to consecutive keys,
  // whichever connection (or instance) sends them (a per-connection cycle would send 50 copies of each key).
  const counter = { next: 0 };
  const connections = Math.max(1, Math.round(job.connections / job.urls.length));
  const results = await Promise.all(job.urls.map((url) => runOne(job, url, connections, seconds, counter)));
  const statusCodes: Record<string, number> = {};
  for (const result of results)
    for (const [code, stats] of Object.entries(result.statusCodeStats ?? {}))
      statusCodes[code] = (statusCodes[code] ?? 0) + (stats as { count: number }).count;
  const sum = (f: (r: autocannon.Result) => number) => results.reduce((n, r) => n + f(r), 0);
  return {
    requestsPerSecond: sum((r) => r.requests.total / r.duration),
    p50Ms: Math.max(...results.map((r) => r.latency.p50)),
    p99Ms: Math.max(...results.map((r) => r.latency.p99)),
    total: sum((r) => r.requests.total),
    non2xx: sum((r) => r.non2xx),
    errors: sum((r) => r.errors),
    timeouts: sum((r) => r.timeouts),
    statusCodes,
  };
}

function runOne(job: LoadJob, url: string, connections: number, seconds: number, counter: { next: number }): Promise<autocannon.Result> {
  const { plan, keySpace } = job;
  return autocannon({
    url,
    connections,
    pipelining: job.pipelining,
    duration: seconds,
    requests: [
      {
        setupRequest: (request) => {
          const i = counter.next++;
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
  const reply: LoadResult = { id: message.id, ...(await run(message, message.seconds)) };
  process.send!(reply);
});
