import { isUtf8 } from 'node:buffer';
import { badRequest } from '../errors.js';
import { formatNumber, parseNumber } from './numbers.js';
import type { StoredValue } from './stored-value.js';

/** The bare media type of a Content-Type header: lower-cased, parameters dropped. */
export function mediaType(contentType: string | undefined): string {
  if (!contentType) return '';
  const semi = contentType.indexOf(';');
  return (semi === -1 ? contentType : contentType.slice(0, semi)).trim().toLowerCase();
}

export function isValidJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/**
 * Decides the stored type of a set body, in the spec's order of evidence: JSON and text
 * Content-Types, explicit octet-stream, the number grammar, valid JSON, else raw bytes.
 * Throws a 400 when the Content-Type promises JSON or text and the body is not.
 */
export function inferValue(body: Buffer, contentType: string | undefined): StoredValue {
  const media = mediaType(contentType);
  if (media === 'application/json') {
    if (!isUtf8(body) || !isValidJson(body.toString('utf8'))) throw badRequest('body is not valid JSON');
    return { type: 'json', data: body };
  }
  if (media === 'text/plain') {
    if (!isUtf8(body)) throw badRequest('text/plain body is not valid UTF-8');
    return { type: 'text', data: body };
  }
  if (media === 'application/octet-stream') return { type: 'bytes', data: body };
  if (body.length > 0 && isUtf8(body)) {
    const text = body.toString('utf8');
    const number = parseNumber(text);
    if (number) return { type: number.kind, data: Buffer.from(formatNumber(number)) };
    if (isValidJson(text)) return { type: 'json', data: body };
  }
  return { type: 'bytes', data: body };
}
