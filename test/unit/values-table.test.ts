import { describe, expect, it } from 'vitest';
import {
  type MetaRow,
  displayWidth,
  eventValueCell,
  expiresCell,
  int64AsString,
  metaRowOf,
  renderColumns,
  renderValuesTable,
  truncate,
  valueCell,
} from '../../src/cli/values-table.js';

const NOW = Date.parse('2026-01-01T00:00:00.000Z');
const rows: MetaRow[] = [
  { key: 'greeting', type: 'text', size: 5, expires_at: null, value: 'hello' },
  {
    key: 'config/app',
    type: 'json',
    size: 40,
    expires_at: '2026-01-01T03:00:00.000Z',
    value: { name: 'kvb', tags: ['a', 'b'], deep: { x: 1 } },
  },
  { key: 'blob', type: 'bytes', size: 16384, expires_at: null, value: Buffer.alloc(16384, 0xab).toString('base64') },
  { key: 'ユーザー/設定/とても長いキーの名前', type: 'text', size: 300, expires_at: '2026-01-01T00:00:30.000Z', value: 'ü'.repeat(150) },
  { key: 'multi\nline', type: 'text', size: 12, expires_at: null, value: 'line1\nline2\x1b' },
  { key: 'n', type: 'int64', size: 2, expires_at: '2026-01-09T00:00:00.000Z', value: 42 },
];

describe('kvb ls --values table (pure renderer)', () => {
  it.each([40, 80, 200])('every line fits %i columns, one line per key plus the heading, no rules', (width) => {
    const text = renderValuesTable(rows, width, NOW);
    const lines = text.split('\n');
    expect(lines.pop()).toBe('');
    expect(lines).toHaveLength(rows.length + 1);
    for (const l of lines) expect(displayWidth(l), l).toBeLessThanOrEqual(width);
    expect(text).not.toMatch(/[─│┌┼]/);
    expect(lines[0]).toMatch(/^key\s+type\s+size\s+expires\s+value$/);
  });

  it('at 200 columns nothing short is cut; bytes show their size, not their content', () => {
    const lines = renderValuesTable(rows, 200, NOW).split('\n');
    expect(lines[1]).toMatch(/^greeting\s+text\s+5\s+-\s+hello$/);
    expect(lines[2]).toMatch(/^config\/app\s+json\s+40\s+in 3h\s+\{"name":"kvb","tags":\["a","b"\],"deep":\{"x":1\}\}$/);
    expect(lines[3]).toMatch(/^blob\s+bytes\s+16384\s+-\s+<16384 bytes>$/);
    expect(lines[3]).not.toContain('q6ur');
    expect(lines[4]).toContain('ユーザー/設定/とても長いキーの名前');
    expect(lines[6]).toMatch(/^n\s+int64\s+2\s+in 8d\s+42$/);
  });

  it('at 80 columns long keys and values are cut with …, wide characters counted as two columns', () => {
    const lines = renderValuesTable(rows, 80, NOW).split('\n');
    const wide = lines[4]!;
    expect(wide).toMatch(/^ユーザー/);
    expect(wide).toMatch(/ü+…$/);
    expect(displayWidth(wide)).toBeLessThanOrEqual(80);
    // Columns line up: every row's type column starts where the heading's does.
    const typeAt = displayWidth(lines[0]!.slice(0, lines[0]!.indexOf('type')));
    rows.forEach((row, i) => {
      const l = lines[i + 1]!;
      let width = 0;
      let at = 0;
      for (const ch of l) {
        if (width >= typeAt) break;
        width += displayWidth(ch);
        at += ch.length;
      }
      expect(width, l).toBe(typeAt);
      expect(l.slice(at).startsWith(row.type), l).toBe(true);
    });
  });

  it('control characters in keys and values are made visible, never written raw', () => {
    const text = renderValuesTable(rows, 200, NOW);
    expect(text).toContain('multi\\nline');
    expect(text).toContain('line1\\nline2\\x1b');
    expect(text).not.toContain('\x1b');
    expect(text.split('\n')).toHaveLength(rows.length + 2);
  });

  it('truncate and expiresCell', () => {
    expect(truncate('abcdef', 4)).toBe('abc…');
    expect(truncate('abc', 3)).toBe('abc');
    expect(truncate('日本語', 4)).toBe('日…');
    expect(displayWidth('日本語')).toBe(6);
    expect(expiresCell(null, NOW)).toBe('-');
    expect(expiresCell('2026-01-01T00:00:42.000Z', NOW)).toBe('in 42s');
    expect(expiresCell('2026-01-01T00:05:00.000Z', NOW)).toBe('in 5m');
    expect(expiresCell('2025-12-31T00:00:00.000Z', NOW)).toBe('in 0s');
  });
});

describe('one value rendering and one table style (pure)', () => {
  it('a meta line keeps its value exactly: JSON past 2^53, float64 3.0, int64 at the top of its range', () => {
    const big = metaRowOf('{"key":"big","type":"json","size":20,"expires_at":null,"rev":1,"value":99999999999999999999}');
    const three = metaRowOf('{"key":"f","type":"float64","size":3,"expires_at":null,"rev":2,"value":3.0}');
    const max = metaRowOf('{"key":"m","type":"int64","size":19,"expires_at":null,"rev":3,"value":9223372036854775807}');
    expect([valueCell(big), valueCell(three), valueCell(max)]).toEqual(['99999999999999999999', '3.0', '9223372036854775807']);
  });

  it('an event or history value: bytes as <N bytes> from base64, int64 without quotes, JSON from its source', () => {
    expect(eventValueCell('bytes', Buffer.alloc(3000).toString('base64'))).toBe('<3000 bytes>');
    expect(eventValueCell('bytes', Buffer.alloc(4).toString('base64'))).toBe('<4 bytes>');
    expect(eventValueCell('int64', '6')).toBe('6');
    expect(eventValueCell('json', 1e20, '99999999999999999999')).toBe('99999999999999999999');
    expect(eventValueCell('text', 'a\nb')).toBe('a\\nb');
  });

  it('int64AsString quotes only an int64 value, so no JSON reader rounds it', () => {
    expect(int64AsString('{"rev":3,"type":"int64","value":9223372036854775807}')).toBe(
      '{"rev":3,"type":"int64","value":"9223372036854775807"}',
    );
    expect(int64AsString('{"rev":3,"type":"json","value":99999999999999999999}')).toBe(
      '{"rev":3,"type":"json","value":99999999999999999999}',
    );
  });

  it('plain columns: a heading, cells padded by two spaces, no borders; no heading for name/value rows', () => {
    expect(
      renderColumns(
        ['key', 'action'],
        [
          ['cfg', 'set'],
          ['a-longer-key', 'delete'],
        ],
      ),
    ).toBe('key           action\ncfg           set\na-longer-key  delete\n');
    expect(
      renderColumns(
        [],
        [
          ['secret key', 'yes'],
          ['bucket', 'B'],
        ],
      ),
    ).toBe('secret key  yes\nbucket      B\n');
    expect(renderColumns(['key'], [])).toBe('key\n');
  });
});
