/** Pure helpers of the console: no DOM, no fetch (unit-tested in test/unit/console-format.test.ts). */
import type { Permission, ValueType } from '../../src/limits.js';
import { compareKeys } from '../../src/values/key-order.js';

/** "in 6 d", "in 3 h", "in 12 min", "in 40 s", "expired". */
export function relativeExpiry(expiresAt: number, now: number): string {
  const seconds = Math.round((expiresAt - now) / 1000);
  if (seconds <= 0) return 'expired';
  const units: Array<[number, string]> = [
    [86400 * 365, 'y'],
    [86400, 'd'],
    [3600, 'h'],
    [60, 'min'],
  ];
  for (const [size, name] of units) if (seconds >= size) return `in ${Math.floor(seconds / size)} ${name}`;
  return `in ${seconds} s`;
}

/** "512 B", "1.5 KiB". */
/**
 * Who made a history version, in a few words: the credential kind (a token by its id) and the
 * client address; undefined for changes recorded before kvb kept actors.
 */
export function actorLabel(
  actor: { kind: string; token_id: string | null; address: string | null } | null | undefined,
): string | undefined {
  if (!actor) return undefined;
  let who = `${actor.kind} key`;
  if (actor.kind === 'token') who = actor.token_id ? `token ${actor.token_id}` : 'a token';
  else if (actor.kind === 'server') who = 'the server (expiry)';
  else if (actor.kind === 'anonymous') who = 'anonymous';
  return actor.address ? `${who} from ${actor.address}` : who;
}

export function formatSize(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  const kib = bytes / 1024;
  return `${kib < 10 ? kib.toFixed(1) : Math.round(kib)} KiB`;
}

export function toHex(bytes: Uint8Array): string {
  const lines: string[] = [];
  for (let offset = 0; offset < bytes.length; offset += 16) {
    const row = Array.from(bytes.subarray(offset, offset + 16), (b) => b.toString(16).padStart(2, '0'));
    lines.push(`${offset.toString(16).padStart(8, '0')}  ${row.join(' ')}`);
  }
  return lines.join('\n');
}

export function toBase64(bytes: Uint8Array): string {
  let binary = '';
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary);
}

/** Decodes base64 (whitespace ignored); undefined when it is not base64. */
export function fromBase64(text: string): Uint8Array | undefined {
  const clean = text.replace(/\s+/g, '');
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(clean) || clean.length % 4 === 1) return undefined;
  try {
    return Uint8Array.from(atob(clean), (c) => c.charCodeAt(0));
  } catch {
    return undefined;
  }
}

/**
 * JSON shown indented, for display only (the stored bytes are never reformatted). It re-spaces the
 * text instead of parsing it, so every number keeps its digits: JSON.parse would show
 * 99999999999999999999 as 100000000000000000000 and 1.50 as 1.5.
 */
export function prettyJson(text: string): string {
  try {
    JSON.parse(text);
  } catch {
    return text;
  }
  let out = '';
  let depth = 0;
  const newline = () => `\n${'  '.repeat(depth)}`;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c === '"') {
      // A string, copied with its escapes as written.
      let end = i + 1;
      while (text[end] !== '"') end += text[end] === '\\' ? 2 : 1;
      out += text.slice(i, end + 1);
      i = end;
    } else if (c === '{' || c === '[') {
      const close = c === '{' ? '}' : ']';
      let next = i + 1;
      while (/\s/.test(text[next] ?? '')) next++;
      if (text[next] === close) {
        out += c + close;
        i = next;
      } else {
        depth++;
        out += c + newline();
      }
    } else if (c === '}' || c === ']') {
      depth--;
      out += newline() + c;
    } else if (c === ',') out += `,${newline()}`;
    else if (c === ':') out += ': ';
    else if (!/\s/.test(c)) out += c;
  }
  return out;
}

export type Checked = { ok: true; bytes: Uint8Array } | { ok: false; error: string };

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

/** Checks what the editor holds against its type before anything is sent, and encodes it. */
export function encodeValue(type: ValueType, text: string): Checked {
  const utf8 = (s: string): Checked => ({ ok: true, bytes: new TextEncoder().encode(s) });
  switch (type) {
    case 'json':
      try {
        JSON.parse(text);
        return utf8(text);
      } catch (err) {
        return { ok: false, error: `Not valid JSON: ${(err as Error).message}` };
      }
    case 'text':
      return utf8(text);
    case 'int64': {
      const t = text.trim();
      if (!/^[+-]?\d+$/.test(t)) return { ok: false, error: 'Not an integer' };
      const n = BigInt(t);
      if (n < INT64_MIN || n > INT64_MAX) return { ok: false, error: 'Outside the 64-bit integer range' };
      return utf8(n.toString());
    }
    case 'float64': {
      const t = text.trim();
      const n = Number(t);
      if (!/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(t) || !Number.isFinite(n)) return { ok: false, error: 'Not a finite number' };
      // In the server's number grammar; without a fraction or exponent it would store an integer.
      const canonical = String(n);
      return utf8(/^-?\d+$/.test(canonical) ? `${canonical}.0` : canonical);
    }
    case 'bytes': {
      const bytes = fromBase64(text);
      return bytes ? { ok: true, bytes } : { ok: false, error: 'Not base64' };
    }
  }
}

/** The editor's text for a stored value: bytes as base64, everything else as its UTF-8 text. */
export function editableText(type: ValueType, bytes: Uint8Array): string {
  return type === 'bytes' ? toBase64(bytes) : new TextDecoder().decode(bytes);
}

export type Row = { kind: 'folder'; name: string; prefix: string } | { kind: 'key'; key: string };

/**
 * Folds a page of sorted keys into rows: in folder view, keys that continue past the next `/`
 * become one folder row (sorted keys keep a folder's keys together, so pages fold independently
 * once the previous page's last folder is known).
 */
export function foldRows(keys: string[], prefix: string, folders: boolean, previous: Row | undefined): Row[] {
  const rows: Row[] = [];
  let last = previous;
  // A folder is named from the last `/` of the prefix: prefix "no" shows folder "notes/".
  const nameStart = prefix.lastIndexOf('/') + 1;
  for (const key of keys) {
    if (folders) {
      const slash = key.indexOf('/', prefix.length);
      if (slash !== -1) {
        const folder = key.slice(0, slash + 1);
        if (last?.kind === 'folder' && last.prefix === folder) continue;
        last = { kind: 'folder', name: key.slice(nameStart, slash + 1), prefix: folder };
        rows.push(last);
        continue;
      }
    }
    last = { kind: 'key', key };
    rows.push(last);
  }
  return rows;
}

/** Breadcrumbs of a prefix: "a/b/c" → [{label: "a/", prefix: "a/"}, {label: "b/", prefix: "a/b/"}, {label: "c", prefix: "a/b/c"}]. */
export function breadcrumbs(prefix: string): Array<{ label: string; prefix: string }> {
  const crumbs: Array<{ label: string; prefix: string }> = [];
  let start = 0;
  while (start < prefix.length) {
    const slash = prefix.indexOf('/', start);
    const end = slash === -1 ? prefix.length : slash + 1;
    crumbs.push({ label: prefix.slice(start, end), prefix: prefix.slice(0, end) });
    start = end;
  }
  return crumbs;
}

const shellQuote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/** A curl command that reads the key (the credential stays a shell variable, never pasted). */
export function curlCommand(apiBase: string, bucket: string, key: string): string {
  const url = `${apiBase}/${encodeURIComponent(bucket)}/${encodeURIComponent(key)}`;
  return `curl -H "Authorization: Bearer $KVB_CREDENTIAL" ${shellQuote(url)}`;
}

/** A random key for the "generate" buttons: 32 base64url characters (192 bits). */
export function generateKey(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(24));
  return toBase64(bytes).replace(/\+/g, '-').replace(/\//g, '_');
}

/** What a token says about itself (its claims), without verifying it: undefined when it is not a kvb token. */
export function tokenClaims(credential: string): { prefix: string; permissions: Permission[]; expiresAt: number } | undefined {
  const parts = credential.split('.');
  if (parts.length !== 3) return undefined;
  try {
    const payload = JSON.parse(atob(parts[1]!.replace(/-/g, '+').replace(/_/g, '/'))) as Record<string, unknown>;
    const { pfx, perm, exp } = payload;
    if (typeof pfx !== 'string' || !Array.isArray(perm) || typeof exp !== 'number') return undefined;
    return { prefix: pfx, permissions: perm as Permission[], expiresAt: exp * 1000 };
  } catch {
    return undefined;
  }
}

// The server's key order, for the keys view's sorted inserts (and its tests).
export { compareKeys };

/** The row a key shows as under `prefix`: itself, or (folder view) the folder it is in. */
export function rowOf(key: string, prefix: string, folders: boolean): Row {
  const slash = folders ? key.indexOf('/', prefix.length) : -1;
  if (slash === -1) return { kind: 'key', key };
  const nameStart = prefix.lastIndexOf('/') + 1;
  return { kind: 'folder', name: key.slice(nameStart, slash + 1), prefix: key.slice(0, slash + 1) };
}

/** A row's identity and its place in the order: a key, or a folder's prefix. */
export const rowId = (row: Row) => (row.kind === 'key' ? row.key : row.prefix);

/**
 * The rows after a key was written (`set`) or removed (`delete`), as a live feed reports it: a
 * new row is placed in order, or not at all when it sorts after the last loaded row while more
 * pages follow (that page will bring it). A folder row stays when a key in it is removed (the
 * keys view checks whether the folder is empty and then takes it away with `removeRow`).
 */
export function applyChange(
  rows: Row[],
  key: string,
  change: 'set' | 'delete',
  prefix: string,
  folders: boolean,
  complete: boolean,
): Row[] {
  const row = rowOf(key, prefix, folders);
  const id = rowId(row);
  let low = 0;
  let high = rows.length;
  while (low < high) {
    const mid = (low + high) >> 1;
    if (compareKeys(rowId(rows[mid]!), id) < 0) low = mid + 1;
    else high = mid;
  }
  const present = low < rows.length && rowId(rows[low]!) === id;
  if (change === 'delete') return present && row.kind === 'key' ? rows.slice(0, low).concat(rows.slice(low + 1)) : rows;
  if (present || (low === rows.length && !complete)) return rows;
  return rows.slice(0, low).concat([row], rows.slice(low));
}

/** The rows without the one whose identity (a key, or a folder's prefix) is `id`. */
export function removeRow(rows: Row[], id: string): Row[] {
  const at = rows.findIndex((row) => rowId(row) === id);
  return at === -1 ? rows : rows.slice(0, at).concat(rows.slice(at + 1));
}
