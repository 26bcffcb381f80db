/**
 * Shares the CPU spent on slow credential hashes fairly between sources (client addresses).
 *
 * Each source has its own queue; free slots go round-robin over the sources that wait, so one
 * source flooding unknown credentials waits behind itself while every other source's next
 * verification runs after at most one slot frees. A verification is refused (the server answers
 * 429 with Retry-After) only when it would wait too long: past `maxSourceWaitMs` for its source,
 * or past `maxTotalWaitMs` for everything queued. Both are times, estimated from the measured
 * duration of recent verifications, not counts, so the bound follows the machine's speed.
 */

export interface SchedulerLimits {
  /** Verifications run at once (the crypto thread pool's share: every core). */
  concurrency: number;
  /** The longest a source's verification may be expected to wait. */
  maxSourceWaitMs: number;
  /** The longest the whole queue may be expected to take to drain. */
  maxTotalWaitMs: number;
  /** The cost assumed until one has been measured (one scrypt run on a busy small machine). */
  initialCostMs?: number;
}

/** Either the verification's result, or refused: it would wait longer than the limits allow. */
export type Scheduled<T> = { ran: true; value: T } | { ran: false; retryAfterSeconds: number; reason: 'source' | 'total' | 'abandoned' };

interface Job {
  start: () => void;
  /** True when nobody waits for the result any more (the client went away): skipped, not run. */
  abandoned: () => boolean;
  skip: () => void;
}

/** Weight of the newest measurement in the running estimate of one verification's duration. */
const SMOOTHING = 0.2;

export class VerificationScheduler {
  private running = 0;
  /** Per source, its waiting jobs; the map's order is the round-robin order. */
  private readonly queues = new Map<string, Job[]>();
  private waiting = 0;
  private costMs: number;
  private refused = 0;

  constructor(private readonly limits: SchedulerLimits) {
    this.costMs = limits.initialCostMs ?? 100;
  }

  /** What the scheduler knows now (for tests, metrics and the bench). */
  stats(): { running: number; waiting: number; sources: number; costMs: number; refused: number } {
    return { running: this.running, waiting: this.waiting, sources: this.queues.size, costMs: this.costMs, refused: this.refused };
  }

  /** Expected wait before a new job of `source` starts, in ms. */
  private expectedWaitMs(source: string): { source: number; total: number } {
    const slotMs = this.costMs / this.limits.concurrency;
    const own = this.queues.get(source)?.length ?? 0;
    // Round-robin: each queued job of this source also lets one job of every other waiting source go first.
    const others = this.queues.size - (this.queues.has(source) ? 1 : 0);
    const busy = this.running >= this.limits.concurrency ? 1 : 0;
    return { source: (own + busy) * (1 + others) * slotMs, total: (this.waiting + busy) * slotMs };
  }

  /** Runs `verify` in `source`'s turn, or refuses at once when it would wait too long. */
  async run<T>(source: string, verify: () => Promise<T>, abandoned: () => boolean = () => false): Promise<Scheduled<T>> {
    if (this.running >= this.limits.concurrency || this.waiting > 0) {
      const expected = this.expectedWaitMs(source);
      const over =
        expected.source > this.limits.maxSourceWaitMs
          ? { reason: 'source' as const, excess: expected.source - this.limits.maxSourceWaitMs }
          : expected.total > this.limits.maxTotalWaitMs
            ? { reason: 'total' as const, excess: expected.total - this.limits.maxTotalWaitMs }
            : undefined;
      if (over) this.refused++;
      if (over) return { ran: false, reason: over.reason, retryAfterSeconds: Math.min(60, Math.max(1, Math.ceil(over.excess / 1000))) };
      const started = await new Promise<boolean>((resolve) => {
        const job: Job = { start: () => resolve(true), skip: () => resolve(false), abandoned };
        const queue = this.queues.get(source);
        if (queue) queue.push(job);
        else this.queues.set(source, [job]);
        this.waiting++;
      });
      if (!started) return { ran: false, reason: 'abandoned', retryAfterSeconds: 1 };
    } else this.running++;
    const began = performance.now();
    try {
      return { ran: true, value: await verify() };
    } finally {
      this.costMs += SMOOTHING * (performance.now() - began - this.costMs);
      this.next();
    }
  }

  /** Passes the freed slot to the next source in turn (its oldest job); `running` drops when none waits. */
  private next(): void {
    for (const [source, queue] of this.queues) {
      const job = queue.shift()!;
      this.waiting--;
      // To the back of the round: the next slot goes to the next source.
      this.queues.delete(source);
      if (queue.length > 0) this.queues.set(source, queue);
      if (job.abandoned()) {
        job.skip();
        continue;
      }
      job.start();
      return;
    }
    this.running--;
  }
}
