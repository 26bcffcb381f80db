/**
 * The floor that keeps a bucket's history within `maxBytes`: given the bytes of each revision's
 * change rows above the current floor, newest first, the newest revisions that fit stay and the
 * floor rises to the newest one that does not. Undefined when everything fits (or no bound).
 */
export function floorWithin(revisions: Array<{ revision: number; bytes: number }>, maxBytes: number): number | undefined {
  if (maxBytes <= 0) return undefined;
  let kept = 0;
  for (const { revision, bytes } of revisions) {
    if (kept + bytes > maxBytes) return revision;
    kept += bytes;
  }
  return undefined;
}
