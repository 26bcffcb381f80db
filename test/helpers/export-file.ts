import { createHash } from 'node:crypto';

export interface ExportItem {
  key: string;
  type: 'text' | 'json' | 'int64' | 'float64' | 'bytes';
  /** The value exactly as the line carries it (JSON text). */
  value: string;
  expires_at?: string | null;
}

/** Builds an export file (header, lines, end line with the right count and SHA-256) from raw items. */
export function exportFile(items: ExportItem[], bucket = 'test'): string {
  let body = `{"kvb":"export","version":1,"bucket":"${bucket}","exported_at":"${new Date().toISOString()}"}\n`;
  for (const item of items) {
    body += `{"key":${JSON.stringify(item.key)},"type":"${item.type}","value":${item.value},"expires_at":${item.expires_at ? JSON.stringify(item.expires_at) : 'null'}}\n`;
  }
  const sha256 = createHash('sha256').update(body).digest('hex');
  return `${body}{"kvb":"end","count":${items.length},"sha256":"${sha256}"}\n`;
}

/** `count` text keys `${prefix}00001`… with short values. */
export function manyKeys(count: number, prefix = 'k'): ExportItem[] {
  return Array.from({ length: count }, (_, i) => ({
    key: `${prefix}${String(i).padStart(6, '0')}`,
    type: 'text' as const,
    value: JSON.stringify(`v${i}`),
  }));
}
