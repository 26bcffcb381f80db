/**
 * When a key written with a TTL expires, as far as the history can tell. The server decides with
 * its own clock: a write takes `now` once, between its call and its return, and the key expires at
 * `now + ttl`; a later operation finds it live while its own `now` (again between its call and
 * return) is before that instant, and expired from then on, swept or not. The runner and the
 * servers share one host clock, so the history converts every server time it is told
 * (`Kvb-Expires-At`, a watch event's `expires_at`, a token's `exp`) onto its own clock as it
 * receives it, and `CLOCK_SLACK_MS` covers what that conversion can be off by (the servers' times
 * are whole milliseconds, and the two clocks are read a moment apart).
 */
export const CLOCK_SLACK_MS = 50;

/** The expiry instant lies in [lo, hi] on the history's clock; hi is Infinity when nobody saw the write answered. */
export interface Expiry {
  readonly lo: number;
  readonly hi: number;
}

/**
 * The expiry a write with `ttl` seconds sets: exactly the one it answered when it was answered
 * (`Kvb-Expires-At`), otherwise somewhere between its call plus the TTL and its return plus the
 * TTL. Undefined: the write set no expiry (the suite's bucket has none by default).
 */
export function expiryOf(
  ttl: number | undefined,
  answered: number | undefined,
  at: { readonly call: number; readonly ret: number },
): Expiry | undefined {
  if (ttl === undefined || ttl === 0) return undefined;
  if (answered !== undefined) return { lo: answered, hi: answered };
  return { lo: at.call + ttl * 1000, hi: at.ret + ttl * 1000 };
}
