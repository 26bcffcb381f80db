/**
 * PLACEHOLDER until the checkers' self-test lands (it replaces this file whole): one failing case,
 * so `--selftest` cannot pass on it.
 */
export function runSelftest(): Array<{ name: string; expected: string; got: string; pass: boolean }> {
  return [{ name: 'the checkers are merged', expected: 'the checkers', got: 'this placeholder', pass: false }];
}
