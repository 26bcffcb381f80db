/**
 * The export format (NDJSON), pure so the server writes and reads it and the CLI can too:
 * a header line, one line per live key with its type, value and absolute expiry, and an end
 * line with the count and the SHA-256 of every preceding line (newlines included).
 */
import { badRequest } from '../errors.js';
import { type JsonNode, JsonSyntaxError, minifyJson, parseJsonSource } from './json-source.js';
import { MAX_VALUE_BYTES } from '../limits.js';
import { checkKey, valueTooLarge } from './keys.js';
import { formatFloat, parseNumber } from './numbers.js';
import type { StoredValue } from './stored-value.js';
import { type ValueType, isValueType } from './value-type.js';

export const EXPORT_VERSION = 1;
export const EXPORT_CONTENT_TYPE = 'application/x-ndjson';
/** Longest line an import accepts: a 128-byte key and a 16 KiB value, JSON-escaped, fit many times over. */
export const MAX_EXPORT_LINE_BYTES = 256 * 1024;

export interface ExportHeader {
  kvb: 'export';
  version: number;
  bucket: string;
  rev?: number;
  exported_at: string;
}

export function headerLine(bucket: string, exportedAt: number, rev?: number): string {
  const header: ExportHeader = {
    kvb: 'export',
    version: EXPORT_VERSION,
    bucket,
    ...(rev !== undefined && { rev }),
    exported_at: new Date(exportedAt).toISOString(),
  };
  return `${JSON.stringify(header)}\n`;
}

/** The value as the export writes it: exact for every type (JSON loses only line breaks between its tokens); watch events use it too. */
export function exportedValue(value: StoredValue): string {
  const text = value.data.toString('utf8');
  switch (value.type) {
    case 'text':
      return JSON.stringify(text);
    case 'json': {
      const trimmed = text.trim();
      return /[\r\n]/.test(trimmed) ? minifyJson(trimmed) : trimmed;
    }
    case 'int64':
      return JSON.stringify(text);
    case 'float64':
      return text;
    case 'bytes':
      return JSON.stringify(value.data.toString('base64'));
  }
}

/**
 * One entry line; `rev` (a dump only) is the bucket revision of the key's last change, `created`
 * (a dump only) its create revision, the revision at which it last became live. An export always
 * states `expires_at` (null: never); `undefined` leaves it out, so the importing bucket's default
 * TTL applies (a plain JSONL line that gave no TTL).
 */
export function entryLine(key: string, value: StoredValue, expiresAt: number | null | undefined, rev?: number, created?: number): string {
  const expires =
    expiresAt === undefined ? '' : `,"expires_at":${expiresAt === null ? 'null' : JSON.stringify(new Date(expiresAt).toISOString())}`;
  const revision = rev === undefined ? '' : `,"rev":${rev}`;
  const creation = created === undefined ? '' : `,"created":${created}`;
  return `{"key":${JSON.stringify(key)},"type":"${value.type}","value":${exportedValue(value)}${expires}${revision}${creation}}\n`;
}

/**
 * A webhook as a bucket's export carries it (a secret-key holder's export of the whole bucket):
 * what it delivers and its state, never its signing secret nor its position (a revision of this
 * bucket, which means nothing in another). An import adds it with a new secret.
 */
export interface ExportedWebhook {
  url: string;
  prefix: string;
  kinds: string[];
  state: 'active' | 'paused';
  paused_reason: string | null;
}

export function webhookLine(w: ExportedWebhook): string {
  return `${JSON.stringify({ kvb: 'webhook', url: w.url, prefix: w.prefix, kinds: w.kinds, state: w.state, paused_reason: w.paused_reason })}\n`;
}

/** An export's webhook line, checked for shape (the import route checks the URL and kinds). */
function parseWebhookLine(line: string): ExportedWebhook {
  const w = JSON.parse(line) as Record<string, unknown>;
  const names = Object.keys(w).filter((name) => name !== 'kvb');
  const unknown = names.find((name) => !['url', 'prefix', 'kinds', 'state', 'paused_reason'].includes(name));
  if (unknown) throw badRequest(`unknown field ${unknown} in a webhook line`);
  const { url, prefix, kinds, state, paused_reason } = w;
  if (typeof url !== 'string') throw badRequest('a webhook line needs a url');
  if (prefix !== undefined && typeof prefix !== 'string') throw badRequest("a webhook line's prefix must be a string");
  if (kinds !== undefined && !(Array.isArray(kinds) && kinds.every((k) => typeof k === 'string')))
    throw badRequest("a webhook line's kinds must be a list of change types");
  if (state !== undefined && state !== 'active' && state !== 'paused') throw badRequest("a webhook line's state must be active or paused");
  if (paused_reason !== undefined && paused_reason !== null && typeof paused_reason !== 'string')
    throw badRequest("a webhook line's paused_reason must be a string or null");
  if (prefix) checkKey(prefix, 'prefix');
  return {
    url,
    prefix: prefix ?? '',
    kinds: (kinds as string[] | undefined) ?? [],
    state: state ?? 'active',
    paused_reason: state === 'paused' ? ((paused_reason as string | null | undefined) ?? null) : null,
  };
}

export function endLine(count: number, sha256: string): string {
  return `${JSON.stringify({ kvb: 'end', count, sha256 })}\n`;
}

export type ExportLine =
  | { kind: 'header'; bucket: string }
  /** `ownExpiry`: the line states `expires_at` (null included); without it the bucket's default TTL applies on import. */
  | { kind: 'entry'; key: string; value: StoredValue; expiresAt: number | null; ownExpiry: boolean; rev?: number; created?: number }
  | { kind: 'end'; count: number; sha256: string }
  | ({ kind: 'webhook' } & ExportedWebhook);

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})$/;

/** A value written as an export line writes it (also a transaction's typed `set`), as the bytes stored. */
export function typedValue(type: ValueType, node: JsonNode): Buffer {
  switch (type) {
    case 'text':
      if (node.kind !== 'string') throw badRequest('a text value must be a JSON string');
      // UTF-8 has no encoding for a lone surrogate (`"\ud800"`): storing it would store U+FFFD instead.
      if (!node.value.isWellFormed()) throw badRequest('a text value must be well-formed Unicode (it holds a lone surrogate)');
      return Buffer.from(node.value, 'utf8');
    case 'json':
      return Buffer.from(node.source, 'utf8');
    case 'int64': {
      const n = node.kind === 'string' ? parseNumber(node.value) : undefined;
      if (n?.kind !== 'int64') throw badRequest('an int64 value must be a decimal string within the int64 range');
      return Buffer.from(n.value.toString());
    }
    case 'float64': {
      const n = node.kind === 'number' ? Number(node.source) : Number.NaN;
      if (!Number.isFinite(n)) throw badRequest('a float64 value must be a finite JSON number');
      return Buffer.from(formatFloat(n));
    }
    case 'bytes':
      if (node.kind !== 'string' || !BASE64.test(node.value)) throw badRequest('a bytes value must be a base64 string');
      return Buffer.from(node.value, 'base64');
  }
}

/**
 * Parses one line (without its newline); throws a 400 saying what is wrong (the caller adds the
 * line number). `withRev`: entry lines may carry `rev` and `created` (a dump's; an export has none).
 */
export function parseExportLine(line: string, withRev = false, maxValueBytes = MAX_VALUE_BYTES): ExportLine {
  let root: JsonNode;
  try {
    root = parseJsonSource(line);
  } catch (err) {
    if (err instanceof JsonSyntaxError) throw badRequest(err.message);
    throw err;
  }
  if (root.kind !== 'object') throw badRequest('a line must be a JSON object');
  const fields = new Map(root.entries);
  if (fields.size !== root.entries.length) throw badRequest('a field is repeated');
  const str = (name: string) => {
    const node = fields.get(name);
    return node?.kind === 'string' ? node.value : undefined;
  };
  const marker = fields.get('kvb');
  if (marker) {
    if (str('kvb') === 'export') {
      const version = fields.get('version');
      if (version?.source !== String(EXPORT_VERSION)) throw badRequest(`unsupported export version (this server reads ${EXPORT_VERSION})`);
      return { kind: 'header', bucket: str('bucket') ?? '' };
    }
    if (str('kvb') === 'end') {
      const count = fields.get('count');
      const sha256 = str('sha256');
      if (count?.kind !== 'number' || !/^\d+$/.test(count.source) || !sha256 || !/^[0-9a-f]{64}$/.test(sha256)) {
        throw badRequest('the end line needs a count and a sha256');
      }
      return { kind: 'end', count: Number(count.source), sha256 };
    }
    if (str('kvb') === 'webhook') return { kind: 'webhook', ...parseWebhookLine(line) };
    throw badRequest('unknown "kvb" line');
  }
  for (const name of fields.keys()) {
    if (!['key', 'type', 'value', 'expires_at', ...(withRev ? ['rev', 'created'] : [])].includes(name))
      throw badRequest(`unknown field ${name}`);
  }
  const revisionField = (name: string): number | undefined => {
    const node = fields.get(name);
    if (!node) return undefined;
    const n = node.kind === 'number' && /^\d+$/.test(node.source) ? Number(node.source) : Number.NaN;
    if (!Number.isSafeInteger(n)) throw badRequest(`${name} must be a non-negative integer`);
    return n;
  };
  const rev = revisionField('rev');
  const created = revisionField('created');
  const key = checkKey(str('key') ?? fields.get('key'), 'key');
  const type = str('type');
  if (type === undefined || !isValueType(type)) throw badRequest('type must be text, json, int64, float64 or bytes');
  const valueNode = fields.get('value');
  if (!valueNode) throw badRequest('value is required');
  const data = typedValue(type, valueNode);
  if (data.length > maxValueBytes) throw badRequest(valueTooLarge(data.length, maxValueBytes));
  const expiresNode = fields.get('expires_at');
  let expiresAt: number | null = null;
  if (expiresNode && expiresNode.kind !== 'null') {
    const text = str('expires_at');
    const ms = text !== undefined && RFC3339.test(text) ? Date.parse(text) : Number.NaN;
    if (!Number.isFinite(ms)) throw badRequest('expires_at must be an RFC 3339 time or null');
    expiresAt = ms;
  }
  return {
    kind: 'entry',
    key,
    value: { type, data },
    expiresAt,
    ownExpiry: expiresNode !== undefined,
    ...(rev !== undefined && { rev }),
    ...(created !== undefined && { created }),
  };
}
