/** One line of a diff: kept, only in the old text (removed), or only in the new one (added). */
export interface DiffLine {
  op: ' ' | '-' | '+';
  text: string;
}

/** Past this many lines on both sides, the diff is the whole old text removed and the whole new added (LCS is quadratic). */
const MAX_LINES = 2000;

/** A line diff from `before` to `after` (longest common subsequence of lines). */
export function lineDiff(before: string, after: string): DiffLine[] {
  const a = before.split('\n');
  const b = after.split('\n');
  if (a.length * b.length > (MAX_LINES * MAX_LINES) / 4) {
    return [...a.map((text) => ({ op: '-' as const, text })), ...b.map((text) => ({ op: '+' as const, text }))];
  }
  // lcs[i][j]: length of the longest common subsequence of a[i..] and b[j..].
  const lcs = Array.from({ length: a.length + 1 }, () => new Uint32Array(b.length + 1));
  for (let i = a.length - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) {
      lcs[i]![j] = a[i] === b[j] ? lcs[i + 1]![j + 1]! + 1 : Math.max(lcs[i + 1]![j]!, lcs[i]![j + 1]!);
    }
  }
  const out: DiffLine[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    if (i < a.length && j < b.length && a[i] === b[j]) {
      out.push({ op: ' ', text: a[i]! });
      i++;
      j++;
    } else if (i < a.length && (j === b.length || lcs[i + 1]![j]! >= lcs[i]![j + 1]!)) {
      // Removals before additions, as diff(1) shows a changed line.
      out.push({ op: '-', text: a[i]! });
      i++;
    } else {
      out.push({ op: '+', text: b[j]! });
      j++;
    }
  }
  return out;
}
