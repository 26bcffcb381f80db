/**
 * Bounds the CPU spent on slow credential hashes. At most `concurrency` verifications run at once
 * and at most `maxWaiting` wait; past that, `run` refuses at once (the server answers 429), so a
 * flood of unseen credentials costs a bounded share of the machine, and requests whose credential
 * is already verified (cached) never queue here at all.
 */
export class VerificationQueue {
  private running = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(
    private readonly concurrency: number,
    private readonly maxWaiting: number,
  ) {}

  /** Runs `verify` when a slot is free; undefined (without running it) when the queue is full. */
  async run<T>(verify: () => Promise<T>): Promise<T | undefined> {
    if (this.running >= this.concurrency) {
      if (this.waiting.length >= this.maxWaiting) return undefined;
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    } else this.running++;
    try {
      return await verify();
    } finally {
      // The slot passes straight to the next waiter, so `running` only drops when none waits.
      const next = this.waiting.shift();
      if (next) next();
      else this.running--;
    }
  }
}
