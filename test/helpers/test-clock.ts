import type { Clock } from '../../src/server/clock.js';

/** A clock that stands still until a test moves it: what an in-process server is given as its time. */
export interface TestClock {
  /** The time it is (ms since the epoch); pass it as the app's clock: `startAppServer({ clock: clock.now })`. */
  now: Clock;
  /** Moves the time on by `ms`: keys and tokens that expire before then have expired, at once. */
  advance(ms: number): void;
  /** Sets the time (ms since the epoch), e.g. to line it up with the store's real-time stamps. */
  set(ms: number): void;
}

/**
 * Starts at `start` (now, by default). Only the time the server decides by moves: its timers
 * (the sweeper's interval, a watch's re-check) still run on the real clock, and the store stamps
 * each revision with the real time. A test that reads the past of keys that expire, or waits for
 * the change log's retention, sets the clock to the real time first (`set(Date.now())`): a
 * revision is read at its own time, and a server time behind it would have a key expired at the
 * revision that wrote it.
 */
export function testClock(start = Date.now()): TestClock {
  let time = start;
  return {
    now: () => time,
    advance(ms) {
      time += ms;
    },
    set(ms) {
      time = ms;
    },
  };
}
