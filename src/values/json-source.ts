/**
 * A small JSON parser that keeps, for every value, the exact source text it came from.
 * Transactions need it: a set value is stored as the JSON the client wrote, so
 * 12345678901234567890 or 1.10 must not go through a JS number on the way.
 */

export type JsonNode =
  | { kind: 'object'; entries: Array<[string, JsonNode]>; source: string; collapsed?: true }
  | { kind: 'array'; items: JsonNode[]; source: string; collapsed?: true }
  | { kind: 'string'; value: string; source: string }
  | { kind: 'number' | 'boolean' | 'null'; source: string };

export class JsonSyntaxError extends Error {}

/** Valid JSON that exceeds a limit of {@link JsonLimits}: the parser stops at the first one. */
export class JsonLimitError extends JsonSyntaxError {
  /** For a value past maxValueLength: what it was (`a value`, `a string`…) and where it began. */
  valueTooLarge?: { what: string; offset: number };
}

/**
 * Bounds on what parsing may build, so that a large body cannot become a large tree.
 * A container at `collapseDepth` or deeper is validated but comes back as its source only
 * (`collapsed: true`, no children), so a deep or wide value costs one string, not a node per item.
 */
export interface JsonLimits {
  /** Depth at which containers are no longer split into nodes (the root is depth 0). */
  collapseDepth?: number;
  /** Largest source of a collapsed container or a number, and largest decoded string, in UTF-16 units. */
  maxValueLength?: number;
  /** Most members an object or array above `collapseDepth` may have, by depth (the last entry applies deeper). */
  maxMembers?: readonly number[];
}

const MAX_DEPTH = 256;
const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
const HEX4 = /^[0-9a-fA-F]{4}$/;
const SKIPPED: JsonNode = { kind: 'null', source: '' };

export function parseJsonSource(text: string, limits: JsonLimits = {}): JsonNode {
  const collapseDepth = limits.collapseDepth ?? Number.POSITIVE_INFINITY;
  const maxValueLength = limits.maxValueLength ?? Number.POSITIVE_INFINITY;
  const maxMembers = limits.maxMembers ?? [];
  const membersAt = (depth: number) => maxMembers[Math.min(depth, maxMembers.length - 1)] ?? Number.POSITIVE_INFINITY;
  let pos = 0;
  /** Where the collapsed container being scanned began, or -1. */
  let collapsedAt = -1;

  const fail = (what: string): never => {
    throw new JsonSyntaxError(`invalid JSON at offset ${pos}: ${what}`);
  };
  const tooLarge = (start: number, what: string): never => {
    const err = new JsonLimitError(`${what} at offset ${start} is larger than ${maxValueLength} bytes`);
    err.valueTooLarge = { what, offset: start };
    throw err;
  };
  const skipWhitespace = () => {
    while (pos < text.length) {
      const c = text.charCodeAt(pos);
      if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) pos++;
      else break;
    }
  };
  const literal = (word: string, kind: 'boolean' | 'null', keep: boolean): JsonNode => {
    if (!text.startsWith(word, pos)) fail('unexpected token');
    pos += word.length;
    return keep ? { kind, source: word } : SKIPPED;
  };
  /** Scans a string; decodes it only when `build`. Its decoded length is bounded while scanning. */
  const parseString = (build: boolean): string => {
    const start = pos;
    let decoded = 0;
    pos++; // opening quote
    for (;;) {
      if (pos >= text.length) fail('unterminated string');
      const c = text.charCodeAt(pos);
      if (c === 0x22) break;
      if (c < 0x20) fail('control character in string');
      if (++decoded > maxValueLength) tooLarge(start, 'a string');
      if (c === 0x5c) {
        const e = text[pos + 1];
        if (e === 'u') {
          if (!HEX4.test(text.slice(pos + 2, pos + 6))) fail('bad \\u escape');
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
    return build ? (JSON.parse(text.slice(start, pos)) as string) : '';
  };
  const parseValue = (depth: number): JsonNode => {
    if (depth > MAX_DEPTH) fail('nested too deeply');
    skipWhitespace();
    const start = pos;
    const c = text[pos];
    // Containers above collapseDepth are split into nodes; scalars down to collapseDepth are kept.
    const build = depth < collapseDepth;
    const keep = depth <= collapseDepth;
    // A collapsed container is bounded as a whole, checked at every member however deep.
    const checkCollapsed = () => {
      if (collapsedAt >= 0 && pos - collapsedAt > maxValueLength) tooLarge(collapsedAt, 'a value');
    };
    if (c === '{' || c === '[') {
      const isObject = c === '{';
      if (depth === collapseDepth) collapsedAt = start;
      const close = isObject ? '}' : ']';
      const limit = build ? membersAt(depth) : Number.POSITIVE_INFINITY;
      pos++;
      const entries: Array<[string, JsonNode]> = [];
      const items: JsonNode[] = [];
      let count = 0;
      skipWhitespace();
      if (text[pos] === close) pos++;
      else {
        for (;;) {
          if (++count > limit) {
            throw new JsonLimitError(`${isObject ? 'an object' : 'an array'} at offset ${start} has more than ${limit} members`);
          }
          let name = '';
          if (isObject) {
            skipWhitespace();
            if (text[pos] !== '"') fail('expected a member name');
            name = parseString(build);
            skipWhitespace();
            if (text[pos] !== ':') fail("expected ':'");
            pos++;
          }
          const child = parseValue(depth + 1);
          if (build) {
            if (isObject) entries.push([name, child]);
            else items.push(child);
          }
          checkCollapsed();
          skipWhitespace();
          if (text[pos] === ',') pos++;
          else if (text[pos] === close) {
            pos++;
            break;
          } else fail(isObject ? "expected ',' or '}'" : "expected ',' or ']'");
        }
      }
      checkCollapsed();
      if (depth === collapseDepth) collapsedAt = -1;
      if (!keep) return SKIPPED;
      const source = text.slice(start, pos);
      const collapsed = build ? {} : { collapsed: true as const };
      return isObject ? { kind: 'object', entries, source, ...collapsed } : { kind: 'array', items, source, ...collapsed };
    }
    if (c === '"') {
      const value = parseString(keep);
      return keep ? { kind: 'string', value, source: text.slice(start, pos) } : SKIPPED;
    }
    if (c === 't') return literal('true', 'boolean', keep);
    if (c === 'f') return literal('false', 'boolean', keep);
    if (c === 'n') return literal('null', 'null', keep);
    NUMBER.lastIndex = pos;
    const m = NUMBER.exec(text);
    if (!m || m[0].length === 0) return fail('unexpected token');
    if (m[0].length > maxValueLength) tooLarge(start, 'a number');
    pos += m[0].length;
    return keep ? { kind: 'number', source: m[0] } : SKIPPED;
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

/** Valid JSON text indented for people, two spaces a level; numbers and strings keep their exact source. */
export function prettyJson(text: string): string {
  const render = (node: JsonNode, depth: number): string => {
    const pad = '  '.repeat(depth + 1);
    const end = '  '.repeat(depth);
    if (node.kind === 'object') {
      if (node.entries.length === 0) return '{}';
      return `{\n${node.entries.map(([name, value]) => `${pad}${JSON.stringify(name)}: ${render(value, depth + 1)}`).join(',\n')}\n${end}}`;
    }
    if (node.kind === 'array') {
      if (node.items.length === 0) return '[]';
      return `[\n${node.items.map((item) => pad + render(item, depth + 1)).join(',\n')}\n${end}]`;
    }
    return node.source;
  };
  return render(parseJsonSource(text), 0);
}
