/** The part of autocannon's programmatic API the bench uses (the package ships no types). */
declare module 'autocannon' {
  namespace autocannon {
    interface Request {
      method?: string;
      path?: string;
      headers?: Record<string, string>;
      body?: string | Buffer;
      setupRequest?: (request: Request) => Request;
    }
    interface Options {
      url: string;
      connections?: number;
      pipelining?: number;
      duration?: number;
      /** Stop after this many requests instead of after `duration`. */
      amount?: number;
      requests?: Request[];
    }
    interface Histogram {
      average: number;
      mean: number;
      total: number;
      p50: number;
      p99: number;
    }
    interface Result {
      duration: number;
      requests: Histogram;
      latency: Histogram;
      non2xx: number;
      errors: number;
      timeouts: number;
      statusCodeStats?: Record<string, { count: number }>;
    }
  }
  function autocannon(options: autocannon.Options): Promise<autocannon.Result>;
  export default autocannon;
}
