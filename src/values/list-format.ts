import type { StoredValue } from './stored-value.js';
import { minifyJson } from './json-source.js';

export const LIST_FORMATS = ['text', 'json', 'jsonl'] as const;
export type ListFormat = (typeof LIST_FORMATS)[number];

export const LIST_CONTENT_TYPES: Record<ListFormat, string> = {
  text: 'text/plain; charset=utf-8',
  json: 'application/json',
  jsonl: 'application/x-ndjson',
};

const ACCEPTED: Record<string, ListFormat> = {
  'application/json': 'json',
  'application/x-ndjson': 'jsonl',
  'application/jsonl': 'jsonl',
  'application/x-jsonlines': 'jsonl',
  'text/plain': 'text',
  'text/*': 'text',
  'application/*': 'json',
  '*/*': 'text',
};

/**
 * Chooses the list format from an Accept header: the acceptable media range with the highest q
 * (earliest on ties). No header (or an empty one) means text; undefined means nothing fits (406).
 */
export function formatFromAccept(accept: string | undefined): ListFormat | undefined {
  if (accept === undefined || accept.trim() === '') return 'text';
  const ranges = accept
    .split(',')
    .map((part, index) => {
      const [type = '', ...params] = part.split(';').map((s) => s.trim().toLowerCase());
      const q = params.find((p) => p.startsWith('q='));
      const quality = q === undefined ? 1 : Number(q.slice(2));
      return { format: ACCEPTED[type], quality: Number.isFinite(quality) ? quality : 0, index };
    })
    .filter((r) => r.format !== undefined && r.quality > 0)
    .sort((a, b) => b.quality - a.quality || a.index - b.index);
  return ranges[0]?.format;
}

/** A value as JSON text: JSON as is (compacted), numbers as numbers, text as a string, bytes as base64. */
export function valueAsJson(entry: StoredValue): string {
  switch (entry.type) {
    case 'json':
      return minifyJson(entry.data.toString('utf8'));
    case 'int64':
    case 'float64':
      return entry.data.toString('utf8');
    case 'text':
      return JSON.stringify(entry.data.toString('utf8'));
    case 'bytes':
      return JSON.stringify(entry.data.toString('base64'));
  }
}

/** Escapes for the text format, so a line can be split back: `\` `\n` `\r` always, `=` in keys. */
function escapeText(s: string, isKey: boolean): string {
  return s.replace(isKey ? /[\\\n\r=]/g : /[\\\n\r]/g, (c) => (c === '\n' ? '\\n' : c === '\r' ? '\\r' : `\\${c}`));
}

function valueAsText(entry: StoredValue): string {
  switch (entry.type) {
    case 'json':
      return minifyJson(entry.data.toString('utf8'));
    case 'bytes':
      return entry.data.toString('base64');
    default:
      return entry.data.toString('utf8');
  }
}

/** One listed key as it appears in `format` (json items carry no separator: the caller adds commas). */
export function formatListItem(format: ListFormat, key: string, entry: StoredValue | undefined): string {
  switch (format) {
    case 'text':
      return entry ? `${escapeText(key, true)}=${escapeText(valueAsText(entry), false)}\n` : `${escapeText(key, true)}\n`;
    case 'json':
      return entry ? `[${JSON.stringify(key)},${valueAsJson(entry)}]` : JSON.stringify(key);
    case 'jsonl':
      return entry ? `[${JSON.stringify(key)},${valueAsJson(entry)}]\n` : `${JSON.stringify(key)}\n`;
  }
}
