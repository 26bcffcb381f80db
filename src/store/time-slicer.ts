/**
 * A long scan's way to share the event loop. SQLite reads are synchronous, and a scan that awaits
 * them page after page only ever awaits settled promises (microtasks): nothing else runs until it
 * is done. Four rollback dry runs over 100,000 keys held `/health` and every other bucket for
 * 3.5–5 s. The function returned here gives the event loop one turn (setImmediate: pending I/O,
 * other requests, run first) once `sliceMs` have passed since the last turn, and is free otherwise.
 */
export function timeSlicer(sliceMs = 10): () => Promise<void> {
  let since = performance.now();
  return async () => {
    if (performance.now() - since < sliceMs) return;
    await new Promise<void>((resolve) => setImmediate(resolve));
    since = performance.now();
  };
}
