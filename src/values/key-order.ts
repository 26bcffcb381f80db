/**
 * Byte order of the keys' UTF-8, the order every listing, export and prefix delete uses (SQLite
 * and PostgreSQL compare the stored bytes). Compared on the strings themselves, without encoding
 * them: UTF-16 code-unit order is code-point order (which is UTF-8 byte order) except where a
 * surrogate (an astral character) meets U+E000–U+FFFF, which it must sort after. Keys are
 * well-formed (lone surrogates are refused), so a difference never sets a lead against a trail.
 */
export function compareKeys(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) return x >= 0xd800 && y >= 0xd800 ? astralLast(x) - astralLast(y) : x - y;
  }
  return a.length - b.length;
}

/** A code unit's rank in code-point order among code units >= U+D800: surrogates above the rest. */
const astralLast = (unit: number) => (unit <= 0xdfff ? unit + 0x2800 : unit);
