import { availableParallelism } from 'node:os';
import type { SchedulerLimits } from '../auth/verification-scheduler.js';

/** libuv's own default pool size. */
const LIBUV_DEFAULT_THREADS = 4;

/**
 * Gives libuv's thread pool (where scrypt runs) every core, plus two threads so file and DNS work
 * never waits behind a full set of hashes. libuv reads UV_THREADPOOL_SIZE once, when the pool
 * first starts, so `kvb serve` calls this before it opens the store (the first pool use: a
 * PostgreSQL host's DNS lookup). An operator's own UV_THREADPOOL_SIZE is kept.
 */
export function sizeCryptoThreadPool(): void {
  if (Number(process.env.UV_THREADPOOL_SIZE) > 0) return;
  process.env.UV_THREADPOOL_SIZE = String(Math.max(LIBUV_DEFAULT_THREADS, availableParallelism() + 2));
}

/** How many slow hashes run at once: one per core, within the pool's size. */
export function verificationConcurrency(): number {
  const pool = Number(process.env.UV_THREADPOOL_SIZE) || LIBUV_DEFAULT_THREADS;
  return Math.max(1, Math.min(availableParallelism(), pool));
}

/** The whole queue may take this many times one address's allowance to drain. */
const TOTAL_WAIT_FACTOR = 2;

/**
 * The verification limits for `--verification-wait`: a client address's unseen credentials may
 * queue for about that long, the whole queue for twice it. Past that, 429.
 */
export const verificationLimits = (waitSeconds: number): SchedulerLimits => ({
  concurrency: verificationConcurrency(),
  maxSourceWaitMs: waitSeconds * 1000,
  maxTotalWaitMs: waitSeconds * 1000 * TOTAL_WAIT_FACTOR,
});
