import { describe, expect, it } from 'vitest';
import type { EntryRow } from '../../src/store/entry-row.js';
import { PointReads, type PointReadRow } from '../../src/store/postgres/postgres-point-reads.js';

/** A statement the test answers by hand: what it was asked, and how to answer it. */
interface Sent {
  pairs: string[];
  answer(rows: PointReadRow[]): void;
  fail(err: unknown): void;
}

function harness(maxInFlight: number) {
  const sent: Sent[] = [];
  const reads = new PointReads(
    (buckets, keys) =>
      new Promise((answer, fail) => {
        sent.push({ pairs: buckets.map((b, i) => `${b}/${keys[i]!.toString()}`), answer, fail });
      }),
    maxInFlight,
  );
  return { sent, read: (bucket: string, key: string) => reads.read(bucket, Buffer.from(key)) };
}

const row = (i: number, value: string): PointReadRow => ({
  i,
  type: 'text',
  value: Buffer.from(value),
  expires_at: null,
  revision: 1,
  create_revision: 1,
});
const nextTurn = () => new Promise((resolve) => setImmediate(resolve));
const textOf = (r: EntryRow | undefined) => r?.value.toString();

describe('PostgreSQL point reads coalesced per turn of the event loop', () => {
  it('the reads of one turn go in one statement, each answered by its own row (by position), absent when it has none', async () => {
    const { sent, read } = harness(2);
    const answers = Promise.all([read('a', 'x'), read('b', 'x'), read('a', 'y'), read('a', 'x')]);
    expect(sent).toHaveLength(0);
    await nextTurn();
    expect(sent.map((s) => s.pairs)).toEqual([['a/x', 'b/x', 'a/y', 'a/x']]);
    sent[0]!.answer([row(4, 'ax'), row(2, 'bx'), row(1, 'ax')]);
    expect((await answers).map(textOf)).toEqual(['ax', 'bx', undefined, 'ax']);
  });

  it('a read that arrives while the statements in flight run is never answered by them: it goes in the next, sent when one ends', async () => {
    const { sent, read } = harness(1);
    const first = read('a', 'x');
    await nextTurn();
    const second = read('a', 'x');
    const third = read('a', 'z');
    await nextTurn();
    expect(sent).toHaveLength(1);
    sent[0]!.answer([row(1, 'old')]);
    expect(textOf(await first)).toBe('old');
    await nextTurn();
    expect(sent.map((s) => s.pairs)).toEqual([['a/x'], ['a/x', 'a/z']]);
    sent[1]!.answer([row(1, 'new')]);
    expect((await Promise.all([second, third])).map(textOf)).toEqual(['new', undefined]);
  });

  it("a failed statement fails each of its reads, not the next statement's", async () => {
    const { sent, read } = harness(2);
    const failed = Promise.allSettled([read('a', 'x'), read('a', 'y')]);
    await nextTurn();
    sent[0]!.fail(new Error('connection lost'));
    expect((await failed).map((r) => r.status)).toEqual(['rejected', 'rejected']);
    const later = read('a', 'x');
    await nextTurn();
    sent[1]!.answer([row(1, 'v')]);
    expect(textOf(await later)).toBe('v');
  });
});
