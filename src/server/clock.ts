/**
 * What time it is, in milliseconds since the epoch: `Date.now` when serving; tests that run the app
 * in their own process pass a clock they move, instead of waiting for a TTL or a token to run out.
 */
export type Clock = () => number;
