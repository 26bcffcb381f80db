import { describe, expect, it } from 'vitest';
import { changeEvent } from '../../src/server/webhooks/webhook-batch.js';
import { CarriedTails, TAIL_MAX_BYTES, TAIL_MAX_CHANGES } from '../../src/server/webhooks/webhook-tail.js';
import type { Change, ChangeFeed, CommittedChanges } from '../../src/store/store.js';

const set = (revision: number, key: string, data = 'v'): Change => ({
  revision,
  key,
  kind: 'set',
  value: { type: 'text', data: Buffer.from(data) },
  expiresAt: null,
});

/** A feed whose commits carry their changes, noting which buckets are watched. */
function feed() {
  const watched = new Map<string, number>();
  const changes = {
    onCommit: () => {},
    watch: (bucket: string) => {
      watched.set(bucket, (watched.get(bucket) ?? 0) + 1);
      return () => watched.set(bucket, watched.get(bucket)! - 1);
    },
  } as unknown as ChangeFeed;
  return { tails: CarriedTails.of(changes)!, watched };
}

const commit = (bucket: string, from: number, changes: Change[]): CommittedChanges => ({
  bucket,
  from,
  revision: changes.at(-1)!.revision,
  changes,
});

describe('the changes commits carried, kept per bucket for webhook deliveries', () => {
  it('is only for a store whose commits carry their changes', () => {
    expect(CarriedTails.of({ read: async () => [] } as unknown as ChangeFeed)).toBeUndefined();
  });

  it('watches the buckets of active webhooks only, and stops watching those that go', () => {
    const { tails, watched } = feed();
    tails.keep([
      { id: 'w1', bucket: 'a', position: 0 },
      { id: 'w2', bucket: 'a', position: 0 },
      { id: 'w3', bucket: 'b', position: 0 },
    ]);
    expect(Object.fromEntries(watched)).toEqual({ a: 1, b: 1 });
    tails.keep([{ id: 'w3', bucket: 'b', position: 0 }]);
    expect(Object.fromEntries(watched)).toEqual({ a: 0, b: 1 });
    tails.keep([]);
    expect(Object.fromEntries(watched)).toEqual({ a: 0, b: 0 });
  });

  it('holds the changes of commits that follow on from each other, and answers only what it holds whole', () => {
    const { tails } = feed();
    tails.keep([{ id: 'w', bucket: 'a', position: 3 }]);
    // Before any carried commit it holds nothing: a delivery reads the log.
    expect(tails.between('a', 3, 3)).toBeUndefined();
    tails.committed(['a'], [commit('a', 3, [set(4, 'k1'), set(5, 'k2'), set(5, 'k3')])]);
    tails.committed(['a', 'b'], [commit('a', 5, [set(6, 'k4')])]);
    expect(tails.between('a', 3, 6)?.map((c) => [c.revision, c.key])).toEqual([
      [4, 'k1'],
      [5, 'k2'],
      [5, 'k3'],
      [6, 'k4'],
    ]);
    expect(tails.between('a', 4, 5)?.map((c) => c.key)).toEqual(['k2', 'k3']);
    // Before its start, or past its last commit (one that was not handed over yet): not whole.
    expect(tails.between('a', 2, 6)).toBeUndefined();
    expect(tails.between('a', 3, 7)).toBeUndefined();
    expect(tails.between('b', 0, 0)).toBeUndefined();
  });

  it('empties on a commit to the bucket that came without its changes (an import), and starts again at the next carried one', () => {
    const { tails } = feed();
    tails.keep([{ id: 'w', bucket: 'a', position: 0 }]);
    tails.committed(['a'], [commit('a', 0, [set(1, 'k1')])]);
    tails.committed(['a'], undefined);
    expect(tails.between('a', 0, 1)).toBeUndefined();
    tails.committed(['a'], [commit('a', 7, [set(8, 'k2')])]);
    expect(tails.between('a', 0, 8)).toBeUndefined();
    expect(tails.between('a', 7, 8)?.map((c) => c.key)).toEqual(['k2']);
  });

  it('starts again where a carried commit does not follow on from the last it kept', () => {
    const { tails } = feed();
    tails.keep([{ id: 'w', bucket: 'a', position: 0 }]);
    tails.committed(['a'], [commit('a', 0, [set(1, 'k1')])]);
    tails.committed(['a'], [commit('a', 2, [set(3, 'k3')])]);
    expect(tails.between('a', 0, 3)).toBeUndefined();
    expect(tails.between('a', 2, 3)?.map((c) => c.key)).toEqual(['k3']);
  });

  it('drops whole revisions every webhook of the bucket has acknowledged, and keeps what the slowest has not', () => {
    const { tails } = feed();
    tails.keep([
      { id: 'fast', bucket: 'a', position: 0 },
      { id: 'slow', bucket: 'a', position: 0 },
    ]);
    tails.committed(['a'], [commit('a', 0, [set(1, 'k1'), set(2, 'k2'), set(2, 'k3'), set(3, 'k4')])]);
    tails.advanced({ id: 'fast', bucket: 'a', position: 3 });
    expect(tails.between('a', 0, 3)).toHaveLength(4);
    tails.advanced({ id: 'slow', bucket: 'a', position: 2 });
    expect(tails.between('a', 1, 3)).toBeUndefined();
    expect(tails.between('a', 2, 3)?.map((c) => c.key)).toEqual(['k4']);
  });

  it(`keeps at most ${TAIL_MAX_CHANGES} changes and ${TAIL_MAX_BYTES} bytes whatever the webhooks acknowledged, dropping the oldest revisions`, () => {
    const { tails } = feed();
    tails.keep([{ id: 'w', bucket: 'a', position: 0 }]);
    const many = Array.from({ length: TAIL_MAX_CHANGES + 10 }, (_, i) => set(i + 1, `k${i}`));
    tails.committed(['a'], [commit('a', 0, many)]);
    expect(tails.between('a', 0, many.length)).toBeUndefined();
    expect(tails.between('a', 10, many.length)).toHaveLength(TAIL_MAX_CHANGES);
    const big = 'x'.repeat(1024 * 1024);
    const last = many.length;
    tails.committed(
      ['a'],
      [
        commit(
          'a',
          last,
          Array.from({ length: 9 }, (_, i) => set(last + 1 + i, `big${i}`, big)),
        ),
      ],
    );
    // Eight megabytes and their keys are past the bound: seven of the nine stay, and no small change before them.
    expect(tails.between('a', last + 2, last + 9)?.map((c) => c.key)).toEqual(['big2', 'big3', 'big4', 'big5', 'big6', 'big7', 'big8']);
    expect(tails.between('a', last + 1, last + 9)).toBeUndefined();
  });

  it("keeps each change as its event's text, made once, not a view of the writer's reply", () => {
    const { tails } = feed();
    tails.keep([{ id: 'w', bucket: 'a', position: 0 }]);
    const reply = Buffer.from('xxvalue-in-a-long-replyxx');
    const change = { ...set(1, 'k'), value: { type: 'text' as const, data: reply.subarray(2, 7) } };
    tails.committed(['a'], [commit('a', 0, [change])]);
    reply.fill(0);
    const [kept] = tails.between('a', 0, 1)!;
    expect(JSON.parse(kept!.event)).toEqual({
      id: 'a:1:k',
      type: 'set',
      key: 'k',
      rev: 1,
      value_type: 'text',
      expires_at: null,
      value: 'value',
    });
    expect(kept).toEqual({
      revision: 1,
      key: 'k',
      kind: 'set',
      event: changeEvent('a', { ...change, value: { type: 'text', data: Buffer.from('value') } }),
    });
  });
});
