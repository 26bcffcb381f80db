/**
 * Shares the CPU spent on slow credential hashes fairly between sources (client addresses).
 *
 * Each source has its own queue; free slots go round-robin over the sources that wait, so one
 * source flooding unknown credentials waits behind itself while every other source's next
 * verification runs after at most one slot frees. A verification is refused (the server answers
 * 429 with Retry-After) only when it would wait too long: past `maxSourceWaitMs` behind its own
 * source's queue, or when everything queued would take past `maxTotalWaitMs` to drain. Both are
 * times, estimated from the measured duration of recent verifications, not counts, so the bound
 * follows the machine's speed. When the estimate grows (the machine got busier), queued
 * verifications that would now wait too long are refused at once rather than later, and the
 * total bound always takes from the longest queue: one source cannot fill it to shut others out.
 */

export interface SchedulerLimits {
  /** Verifications run at once (the crypto thread pool's share: every core). */
  concurrency: number;
  /** The longest a verification may be expected to wait behind its own source's queue. */
  maxSourceWaitMs: number;
  /** The longest the whole queue may be expected to take to drain. */
  maxTotalWaitMs: number;
  /** The cost assumed until one has been measured (one scrypt run on a busy small machine). */
  initialCostMs?: number;
  /** The clock (tests pass their own). */
  now?: () => number;
}

type Refusal = { ran: false; retryAfterSeconds: number; reason: 'source' | 'total' | 'abandoned' };
/** Either the verification's result, or refused: it would wait longer than the limits allow. */
export type Scheduled<T> = { ran: true; value: T } | Refusal;

interface Job {
  start: () => void;
  /** True when nobody waits for the result any more (the client went away): skipped, not run. */
  abandoned: () => boolean;
  refuse: (refusal: Refusal) => void;
}

/** Weight of the newest measurement in the running estimate of one verification's duration. */
const SMOOTHING = 0.2;

const retryAfter = (excessMs: number) => Math.min(60, Math.max(1, Math.ceil(excessMs / 1000)));

export class VerificationScheduler {
  private running = 0;
  /** Per source, its waiting jobs; the map's order is the round-robin order. */
  private readonly queues = new Map<string, Job[]>();
  private waiting = 0;
  private costMs: number;
  private refused = 0;
  private readonly now: () => number;

  constructor(private readonly limits: SchedulerLimits) {
    this.costMs = limits.initialCostMs ?? 100;
    this.now = limits.now ?? (() => performance.now());
  }

  /** What the scheduler knows now (for tests and metrics). */
  stats(): { running: number; waiting: number; sources: number; costMs: number; refused: number } {
    return { running: this.running, waiting: this.waiting, sources: this.queues.size, costMs: this.costMs, refused: this.refused };
  }

  /**
   * Expected wait before a job with `ahead` jobs in front of it starts: those, plus a slot freeing
   * when all are busy (not counted when `freeing`: one just finished and its slot is handed on).
   */
  private waitMs(ahead: number, freeing = false): number {
    const busy = this.running - (freeing ? 1 : 0) >= this.limits.concurrency ? 1 : 0;
    return ((ahead + busy) * this.costMs) / this.limits.concurrency;
  }

  /** Runs `verify` in `source`'s turn, or refuses at once when it would wait too long. */
  async run<T>(source: string, verify: () => Promise<T>, abandoned: () => boolean = () => false): Promise<Scheduled<T>> {
    if (this.running >= this.limits.concurrency || this.waiting > 0) {
      const own = this.queues.get(source)?.length ?? 0;
      const sourceWait = this.waitMs(own);
      if (sourceWait > this.limits.maxSourceWaitMs) return this.refusal('source', sourceWait - this.limits.maxSourceWaitMs);
      const totalWait = this.waitMs(this.waiting);
      if (totalWait > this.limits.maxTotalWaitMs) {
        // Full: the newcomer gets in only by taking the place of the longest queue's last job.
        const longest = this.longestQueue();
        if (!longest || longest[1].length <= own + 1) return this.refusal('total', totalWait - this.limits.maxTotalWaitMs);
        this.shedLast(longest[0], 'total', totalWait - this.limits.maxTotalWaitMs);
      }
      const started = await new Promise<Refusal | undefined>((resolve) => {
        const job: Job = { start: () => resolve(undefined), refuse: resolve, abandoned };
        const queue = this.queues.get(source);
        if (queue) queue.push(job);
        else this.queues.set(source, [job]);
        this.waiting++;
      });
      if (started) return started;
    } else this.running++;
    const began = this.now();
    try {
      return { ran: true, value: await verify() };
    } finally {
      this.costMs += SMOOTHING * (this.now() - began - this.costMs);
      this.shedOverdue();
      this.next();
    }
  }

  private refusal(reason: 'source' | 'total', excessMs: number): Refusal {
    this.refused++;
    return { ran: false, reason, retryAfterSeconds: retryAfter(excessMs) };
  }

  private longestQueue(): [string, Job[]] | undefined {
    let longest: [string, Job[]] | undefined;
    for (const entry of this.queues) if (!longest || entry[1].length > longest[1].length) longest = entry;
    return longest;
  }

  /** Refuses the last waiting job of `source` (the one that would wait longest). */
  private shedLast(source: string, reason: 'source' | 'total', excessMs: number): void {
    const queue = this.queues.get(source)!;
    const job = queue.pop()!;
    this.waiting--;
    if (queue.length === 0) this.queues.delete(source);
    job.refuse(this.refusal(reason, excessMs));
  }

  /** After the estimate changed: refuses, from the back, what would now wait past either bound. */
  private shedOverdue(): void {
    for (const [source, queue] of [...this.queues]) {
      // The job at index i starts after i jobs of its own source.
      while (queue.length > 0 && this.waitMs(queue.length - 1, true) > this.limits.maxSourceWaitMs) {
        this.shedLast(source, 'source', this.waitMs(queue.length - 1, true) - this.limits.maxSourceWaitMs);
      }
    }
    while (this.waiting > 0 && this.waitMs(this.waiting - 1, true) > this.limits.maxTotalWaitMs) {
      const [source] = this.longestQueue()!;
      this.shedLast(source, 'total', this.waitMs(this.waiting - 1, true) - this.limits.maxTotalWaitMs);
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
        job.refuse({ ran: false, reason: 'abandoned', retryAfterSeconds: 1 });
        continue;
      }
      job.start();
      return;
    }
    this.running--;
  }
}
