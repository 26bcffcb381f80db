import type { FailureState } from '../../store/webhook-types.js';

/** The first retry comes after about this long; each failure doubles it, up to MAX_DELAY_MS. */
export const BASE_DELAY_MS = 1000;
export const MAX_DELAY_MS = 60 * 60 * 1000;

/**
 * What a failed attempt leaves: exponential backoff with full jitter (a random delay up to the
 * doubled bound, so receivers coming back are not hit by every subscription at once), or, once the
 * failures have gone on longer than `boundMs`, paused with the reason.
 */
export function afterFailure(
  previous: { attempts: number; failingSince: number | null },
  now: number,
  boundMs: number,
  reason: string,
  random: () => number = Math.random,
): FailureState {
  const attempts = previous.attempts + 1;
  const failingSince = previous.failingSince ?? now;
  if (now - failingSince >= boundMs) {
    return {
      attempts,
      failingSince,
      nextAttemptAt: now,
      pausedReason: `failing for ${Math.round((now - failingSince) / 1000)} s: ${reason}`,
    };
  }
  const ceiling = Math.min(MAX_DELAY_MS, BASE_DELAY_MS * 2 ** Math.min(attempts - 1, 30));
  const delay = Math.max(BASE_DELAY_MS / 2, Math.floor(random() * ceiling));
  return { attempts, failingSince, nextAttemptAt: Math.min(now + delay, failingSince + boundMs), pausedReason: null };
}
