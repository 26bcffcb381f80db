/**
 * A small JSON parser that keeps, for every value, the exact source text it came from.
 * Transactions need it: a set value is stored as the JSON the client wrote, so
 * 12345678901234567890 or 1.10 must not go through a JS number on the way.
 */

export type JsonNode =
  | { kind: 'object'; entries: Array<[string, JsonNode]>; source: string }
  | { kind: 'array'; items: JsonNode[]; source: string }
  | { kind: 'string'; value: string; source: string }
  | { kind: 'number' | 'boolean' | 'null'; source: string };

export class JsonSyntaxError extends Error {}

const MAX_DEPTH = 256;
const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;

export function parseJsonSource(text: string): JsonNode {
  let pos = 0;

  const fail = (what: string): never => {
    throw new JsonSyntaxError(`invalid JSON at offset ${pos}: ${what}`);
  };
  const skipWhitespace = () => {
    while (pos < text.length) {
      const c = text.charCodeAt(pos);
      if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) pos++;
      else break;
    }
  };
  const literal = (word: string, kind: 'boolean' | 'null'): JsonNode => {
    if (!text.startsWith(word, pos)) fail('unexpected token');
    pos += word.length;
    return { kind, source: word };
  };
  const parseString = (): string => {
    const start = pos;
    pos++; // opening quote
    for (;;) {
      if (pos >= text.length) fail('unterminated string');
      const c = text.charCodeAt(pos);
      if (c === 0x22) break;
      if (c < 0x20) fail('control character in string');
      if (c === 0x5c) {
        const e = text[pos + 1];
        if (e === 'u') {
          if (!/^[0-9a-fA-F]{4}$/.test(text.slice(pos + 2, pos + 6))) fail('bad \\u escape');
          pos += 6;
          continue;
        }
        if (e === undefined || !'"\\/bfnrt'.includes(e)) fail('bad escape');
        pos += 2;
        continue;
      }
      pos++;
    }
    pos++; // closing quote
    return JSON.parse(text.slice(start, pos)) as string;
  };
  const parseValue = (depth: number): JsonNode => {
    if (depth > MAX_DEPTH) fail('nested too deeply');
    skipWhitespace();
    const start = pos;
    const c = text[pos];
    if (c === '{') {
      pos++;
      const entries: Array<[string, JsonNode]> = [];
      skipWhitespace();
      if (text[pos] === '}') pos++;
      else {
        for (;;) {
          skipWhitespace();
          if (text[pos] !== '"') fail('expected a member name');
          const name = parseString();
          skipWhitespace();
          if (text[pos] !== ':') fail("expected ':'");
          pos++;
          entries.push([name, parseValue(depth + 1)]);
          skipWhitespace();
          if (text[pos] === ',') pos++;
          else if (text[pos] === '}') {
            pos++;
            break;
          } else fail("expected ',' or '}'");
        }
      }
      return { kind: 'object', entries, source: text.slice(start, pos) };
    }
    if (c === '[') {
      pos++;
      const items: JsonNode[] = [];
      skipWhitespace();
      if (text[pos] === ']') pos++;
      else {
        for (;;) {
          items.push(parseValue(depth + 1));
          skipWhitespace();
          if (text[pos] === ',') pos++;
          else if (text[pos] === ']') {
            pos++;
            break;
          } else fail("expected ',' or ']'");
        }
      }
      return { kind: 'array', items, source: text.slice(start, pos) };
    }
    if (c === '"') {
      const value = parseString();
      return { kind: 'string', value, source: text.slice(start, pos) };
    }
    if (c === 't') return literal('true', 'boolean');
    if (c === 'f') return literal('false', 'boolean');
    if (c === 'n') return literal('null', 'null');
    NUMBER.lastIndex = pos;
    const m = NUMBER.exec(text);
    if (!m || m[0].length === 0) return fail('unexpected token');
    pos += m[0].length;
    return { kind: 'number', source: m[0] };
  };

  const root = parseValue(0);
  skipWhitespace();
  if (pos !== text.length) fail('trailing characters');
  return root;
}

/** Removes insignificant whitespace from valid JSON text without touching numbers or strings. */
export function minifyJson(text: string): string {
  if (!/[\s]/.test(text)) return text;
  let out = '';
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]!;
    if (inString) {
      out += ch;
      if (ch === '\\') out += text[++i] ?? '';
      else if (ch === '"') inString = false;
    } else if (ch === '"') {
      inString = true;
      out += ch;
    } else if (ch !== ' ' && ch !== '\n' && ch !== '\r' && ch !== '\t') out += ch;
  }
  return out;
}
