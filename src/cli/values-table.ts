/** One key as `?values=true&meta=true` lists it. */
export interface MetaRow {
  key: string;
  type: string;
  size: number;
  expires_at: string | null;
  rev?: number;
  value?: unknown;
  /** The value's JSON text exactly as the listing line carries it: numbers with every digit, float64 `3.0` as `3.0`. */
  source?: string;
}

/** A listing or history line with its int64 value (the last field) as a decimal string, so no JSON reader rounds it. */
export function int64AsString(lineText: string): string {
  return (JSON.parse(lineText) as { type: string | null }).type === 'int64'
    ? lineText.replace(/,"value":(-?\d+)}$/, ',"value":"$1"}')
    : lineText;
}

/** The exact JSON text of a server line's value: its last field in listings, history lines and watch events. */
export function valueSource(lineText: string): string | undefined {
  return /,"value":(.*)\}$/s.exec(lineText)?.[1];
}

/** A meta listing line (jsonl) as a row, keeping the exact text of its value. */
export function metaRowOf(lineText: string): MetaRow {
  const row = JSON.parse(lineText) as MetaRow;
  const source = valueSource(lineText);
  return source === undefined ? row : { ...row, source };
}

const GAP = '  ';
const TYPE_WIDTH = 'float64'.length;

/** Columns a character takes at a terminal: 0 for combining marks, 2 for wide East Asian and emoji, else 1. */
function charWidth(ch: string): number {
  const cp = ch.codePointAt(0)!;
  if (/\p{Mn}|\p{Me}|\p{Cf}/u.test(ch)) return 0;
  if (
    (cp >= 0x1100 && cp <= 0x115f) ||
    (cp >= 0x2e80 && cp <= 0xa4cf && cp !== 0x303f) ||
    (cp >= 0xac00 && cp <= 0xd7a3) ||
    (cp >= 0xf900 && cp <= 0xfaff) ||
    (cp >= 0xfe30 && cp <= 0xfe4f) ||
    (cp >= 0xff00 && cp <= 0xff60) ||
    (cp >= 0xffe0 && cp <= 0xffe6) ||
    (cp >= 0x1f300 && cp <= 0x1faff) ||
    (cp >= 0x20000 && cp <= 0x3fffd)
  ) {
    return 2;
  }
  return 1;
}

/** Display width of a string (after control characters were made visible). */
export function displayWidth(text: string): number {
  let width = 0;
  for (const ch of text) width += charWidth(ch);
  return width;
}

/** Control characters (newlines, tabs, escapes) would break the one-line layout: shown as `\n`, `\t`, `\x1b`. */
function oneLine(text: string): string {
  return text.replace(/[\u0000-\u001f\u007f-\u009f]/g, (c) =>
    c === '\n' ? '\\n' : c === '\t' ? '\\t' : c === '\r' ? '\\r' : `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`,
  );
}

/** Cuts `text` to at most `width` columns, ending in … when cut. */
export function truncate(text: string, width: number): string {
  if (displayWidth(text) <= width) return text;
  if (width <= 0) return '';
  let out = '';
  let used = 0;
  for (const ch of text) {
    const w = charWidth(ch);
    if (used + w > width - 1) break;
    out += ch;
    used += w;
  }
  return `${out}…`;
}

function pad(text: string, width: number, right = false): string {
  const fill = ' '.repeat(Math.max(0, width - displayWidth(text)));
  return right ? fill + text : text + fill;
}

/**
 * A value in one line: bytes as `<N bytes>`, text as is (control characters escaped), JSON and
 * numbers as stored (never through a double, which would round 99999999999999999999 and show 3.0 as 3).
 */
export function valueCell(row: MetaRow): string {
  if (row.type === 'bytes') return `<${row.size} bytes>`;
  if (row.type === 'text') return oneLine(String(row.value));
  return oneLine(row.source ?? (typeof row.value === 'string' ? row.value : JSON.stringify(row.value)));
}

/** When a key expires, relative to `now`: `-` for never, else `in 42s`, `in 5m`, `in 3h`, `in 12d`. */
export function expiresCell(expiresAt: string | null, now: number): string {
  if (expiresAt === null) return '-';
  const seconds = Math.max(0, Math.round((Date.parse(expiresAt) - now) / 1000));
  if (seconds < 60) return `in ${seconds}s`;
  if (seconds < 3600) return `in ${Math.floor(seconds / 60)}m`;
  if (seconds < 86_400) return `in ${Math.floor(seconds / 3600)}h`;
  return `in ${Math.floor(seconds / 86_400)}d`;
}

/**
 * The `kvb ls --values` table: columns key, type, size, expires, value, one line per key, a
 * heading line and no rules; every line at most `width` columns (key and value are cut with …).
 */
export function renderValuesTable(rows: MetaRow[], width: number, now: number): string {
  const cells = rows.map((row) => ({
    key: oneLine(row.key),
    type: row.type,
    size: String(row.size),
    expires: expiresCell(row.expires_at, now),
    value: valueCell(row),
  }));
  const head = { key: 'key', type: 'type', size: 'size', expires: 'expires', value: 'value' };
  const all = [head, ...cells];
  const widest = (column: keyof typeof head) => Math.max(...all.map((c) => displayWidth(c[column])));
  const sizeWidth = widest('size');
  const expiresWidth = widest('expires');
  const typeWidth = Math.min(TYPE_WIDTH, widest('type'));
  // What is left for key and value once the fixed columns and four gaps are placed.
  const free = Math.max(2, width - typeWidth - sizeWidth - expiresWidth - 4 * GAP.length);
  const keyWanted = widest('key');
  const valueWanted = widest('value');
  let keyWidth = keyWanted;
  if (keyWanted + valueWanted > free) {
    // The value gets what the key leaves, but the key never takes more than half when both are long.
    keyWidth = Math.max(1, Math.min(keyWanted, Math.max(Math.ceil(free / 2), free - valueWanted)));
  }
  const valueWidth = Math.max(1, free - keyWidth);
  const lines = all.map((c) => {
    const text = [
      pad(truncate(c.key, keyWidth), keyWidth),
      pad(truncate(c.type, typeWidth), typeWidth),
      pad(c.size, sizeWidth, c !== head),
      pad(c.expires, expiresWidth),
      truncate(c.value, valueWidth),
    ].join(GAP);
    // Last resort for a terminal too narrow for the fixed columns: cut the whole line.
    return truncate(text.trimEnd(), width);
  });
  return `${lines.join('\n')}\n`;
}

/** The `kvb ls -l` table: key, type, size, expires, rev; one line per key, at most `width` columns (keys cut with …). */
export function renderLongTable(rows: MetaRow[], width: number, now: number): string {
  const head = { key: 'key', type: 'type', size: 'size', expires: 'expires', rev: 'rev' };
  const all = [
    head,
    ...rows.map((row) => ({
      key: oneLine(row.key),
      type: row.type,
      size: String(row.size),
      expires: expiresCell(row.expires_at, now),
      rev: String(row.rev ?? ''),
    })),
  ];
  const widest = (column: keyof typeof head) => Math.max(...all.map((c) => displayWidth(c[column])));
  const fixed = { type: Math.min(TYPE_WIDTH, widest('type')), size: widest('size'), expires: widest('expires'), rev: widest('rev') };
  const keyWidth = Math.max(1, Math.min(widest('key'), width - fixed.type - fixed.size - fixed.expires - fixed.rev - 4 * GAP.length));
  const lines = all.map((c) =>
    truncate(
      [
        pad(truncate(c.key, keyWidth), keyWidth),
        pad(c.type, fixed.type),
        pad(c.size, fixed.size, c !== head),
        pad(c.expires, fixed.expires),
        pad(c.rev, fixed.rev, c !== head),
      ]
        .join(GAP)
        .trimEnd(),
      width,
    ),
  );
  return `${lines.join('\n')}\n`;
}

/**
 * Plain columns, as etcdctl and kubectl print them: a heading line (none when `head` is empty),
 * then one line per row, cells padded to their column's width and separated by two spaces; no
 * borders, no rules. Control characters in cells are shown escaped so every row stays one line.
 */
export function renderColumns(head: string[], rows: string[][]): string {
  const all = (head.length > 0 ? [head, ...rows] : rows).map((cells) => cells.map(oneLine));
  const widths: number[] = [];
  for (const cells of all) for (const [i, cell] of cells.entries()) widths[i] = Math.max(widths[i] ?? 0, displayWidth(cell));
  const lines = all.map((cells) =>
    cells
      .map((cell, i) => (i === cells.length - 1 ? cell : pad(cell, widths[i]!)))
      .join(GAP)
      .trimEnd(),
  );
  return lines.length === 0 ? '' : `${lines.join('\n')}\n`;
}

/** A value as a watch event or a history line carries it (int64 a decimal string, bytes base64), in the table's one-line form. */
export function eventValueCell(type: string, value: unknown, source?: string): string {
  const size = type === 'bytes' ? base64Size(String(value)) : 0;
  return valueCell({ key: '', type, size, expires_at: null, value, ...(source !== undefined && type !== 'int64' && { source }) });
}

/** The byte length of standard base64 text. */
function base64Size(text: string): number {
  const padding = text.endsWith('==') ? 2 : text.endsWith('=') ? 1 : 0;
  return Math.floor((text.length * 3) / 4) - padding;
}
