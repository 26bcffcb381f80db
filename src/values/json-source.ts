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

/** Parses JSON text into nodes that keep their source (see JsonNode), within `limits`. */
export function parseJsonSource(text: string, limits: JsonLimits = {}): JsonNode {
  const parser = new SourceParser(text, limits);
  const root = parser.value(0);
  parser.skipWhitespace();
  if (parser.pos !== text.length) parser.fail('trailing characters');
  return root;
}

/** One parse's state: the text, where it is, and the limits. Its methods are the grammar's parts. */
class SourceParser {
  pos = 0;
  /** Where the collapsed container being scanned began, or -1. */
  collapsedAt = -1;
  private readonly collapseDepth: number;
  private readonly maxValueLength: number;
  private readonly maxMembers: readonly number[];

  constructor(
    private readonly text: string,
    limits: JsonLimits,
  ) {
    this.collapseDepth = limits.collapseDepth ?? Number.POSITIVE_INFINITY;
    this.maxValueLength = limits.maxValueLength ?? Number.POSITIVE_INFINITY;
    this.maxMembers = limits.maxMembers ?? [];
  }

  fail(what: string): never {
    throw new JsonSyntaxError(`invalid JSON at offset ${this.pos}: ${what}`);
  }

  private tooLarge(start: number, what: string): never {
    const err = new JsonLimitError(`${what} at offset ${start} is larger than ${this.maxValueLength} bytes`);
    err.valueTooLarge = { what, offset: start };
    throw err;
  }

  private membersAt(depth: number): number {
    return this.maxMembers[Math.min(depth, this.maxMembers.length - 1)] ?? Number.POSITIVE_INFINITY;
  }

  skipWhitespace(): void {
    const text = this.text;
    while (this.pos < text.length) {
      const c = text.charCodeAt(this.pos);
      if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) this.pos++;
      else break;
    }
  }

  /** A collapsed container is bounded as a whole, checked at every member however deep. */
  private checkCollapsed(): void {
    if (this.collapsedAt >= 0 && this.pos - this.collapsedAt > this.maxValueLength) this.tooLarge(this.collapsedAt, 'a value');
  }

  value(depth: number): JsonNode {
    if (depth > MAX_DEPTH) this.fail('nested too deeply');
    this.skipWhitespace();
    const start = this.pos;
    const c = this.text[start];
    // Scalars down to collapseDepth are kept; deeper ones are only checked.
    const keep = depth <= this.collapseDepth;
    if (c === '{' || c === '[') return this.container(depth, c === '{');
    if (c === '"') {
      const value = this.string(keep);
      return keep ? { kind: 'string', value, source: this.text.slice(start, this.pos) } : SKIPPED;
    }
    if (c === 't') return this.literal('true', 'boolean', keep);
    if (c === 'f') return this.literal('false', 'boolean', keep);
    if (c === 'n') return this.literal('null', 'null', keep);
    return this.number(keep);
  }

  /** An object or array; split into nodes above collapseDepth, its source only at it. */
  private container(depth: number, isObject: boolean): JsonNode {
    const start = this.pos;
    const build = depth < this.collapseDepth;
    if (depth === this.collapseDepth) this.collapsedAt = start;
    const close = isObject ? '}' : ']';
    const limit = build ? this.membersAt(depth) : Number.POSITIVE_INFINITY;
    this.pos++;
    const entries: Array<[string, JsonNode]> = [];
    const items: JsonNode[] = [];
    let count = 0;
    this.skipWhitespace();
    if (this.text[this.pos] === close) this.pos++;
    else {
      for (;;) {
        if (++count > limit) {
          throw new JsonLimitError(`${isObject ? 'an object' : 'an array'} at offset ${start} has more than ${limit} members`);
        }
        const name = isObject ? this.memberName(build) : '';
        const child = this.value(depth + 1);
        if (build) {
          if (isObject) entries.push([name, child]);
          else items.push(child);
        }
        this.checkCollapsed();
        this.skipWhitespace();
        if (this.text[this.pos] === ',') this.pos++;
        else if (this.text[this.pos] === close) {
          this.pos++;
          break;
        } else this.fail(isObject ? "expected ',' or '}'" : "expected ',' or ']'");
      }
    }
    this.checkCollapsed();
    if (depth === this.collapseDepth) this.collapsedAt = -1;
    if (depth > this.collapseDepth) return SKIPPED;
    const source = this.text.slice(start, this.pos);
    const collapsed = build ? {} : { collapsed: true as const };
    return isObject ? { kind: 'object', entries, source, ...collapsed } : { kind: 'array', items, source, ...collapsed };
  }

  /** An object member's name and its colon. */
  private memberName(build: boolean): string {
    this.skipWhitespace();
    if (this.text[this.pos] !== '"') this.fail('expected a member name');
    const name = this.string(build);
    this.skipWhitespace();
    if (this.text[this.pos] !== ':') this.fail("expected ':'");
    this.pos++;
    return name;
  }

  private literal(word: string, kind: 'boolean' | 'null', keep: boolean): JsonNode {
    if (!this.text.startsWith(word, this.pos)) this.fail('unexpected token');
    this.pos += word.length;
    return keep ? { kind, source: word } : SKIPPED;
  }

  /** Scans a string; decodes it only when `build`. Its decoded length is bounded while scanning. */
  private string(build: boolean): string {
    const text = this.text;
    const start = this.pos;
    let decoded = 0;
    this.pos++; // opening quote
    for (;;) {
      if (this.pos >= text.length) this.fail('unterminated string');
      const c = text.charCodeAt(this.pos);
      if (c === 0x22) break;
      if (c < 0x20) this.fail('control character in string');
      if (++decoded > this.maxValueLength) this.tooLarge(start, 'a string');
      if (c === 0x5c) {
        const e = text[this.pos + 1];
        if (e === 'u') {
          if (!HEX4.test(text.slice(this.pos + 2, this.pos + 6))) this.fail('bad \\u escape');
          this.pos += 6;
          continue;
        }
        if (e === undefined || !'"\\/bfnrt'.includes(e)) this.fail('bad escape');
        this.pos += 2;
        continue;
      }
      this.pos++;
    }
    this.pos++; // closing quote
    return build ? (JSON.parse(text.slice(start, this.pos)) as string) : '';
  }

  private number(keep: boolean): JsonNode {
    const start = this.pos;
    NUMBER.lastIndex = start;
    const m = NUMBER.exec(this.text);
    if (!m || m[0].length === 0) return this.fail('unexpected token');
    if (m[0].length > this.maxValueLength) this.tooLarge(start, 'a number');
    this.pos += m[0].length;
    return keep ? { kind: 'number', source: m[0] } : SKIPPED;
  }
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
