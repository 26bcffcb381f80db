import type { BankRead, FencedWrite, Op, RecordedHistory, WatchEvent, WatchLog } from './history.js';

/** Builders for the self-test's hand-made histories (selftest.ts): operations, watch events, bank reads, fenced writes. */
type Times = readonly [call: number, ret: number];

/** Builds one history's operations with unique ids; `ret` Infinity makes an operation indeterminate. */
export class Ops {
  readonly ops: Op[] = [];
  private group = 0;
  private add(op: Omit<Op, 'id' | 'instance' | 'outcome'> & { outcome?: Op['outcome']; instance?: string }): Op {
    // No answer (ret Infinity): indeterminate, whatever the helper was asked for.
    const outcome = Number.isFinite(op.ret) ? (op.outcome ?? 'ok') : 'unknown';
    const full: Op = { instance: 'a', ...op, outcome, id: this.ops.length + 1 };
    if (outcome !== 'ok') delete full.output;
    if (outcome === 'unknown') delete full.status;
    this.ops.push(full);
    return full;
  }
  read(client: number, key: string, [call, ret]: Times, value: string | null, revision?: number): Op {
    return this.add({ client, model: 'register', key, input: { f: 'read' }, call, ret, output: { value, revision } });
  }
  write(client: number, key: string, value: string, [call, ret]: Times, revision?: number): Op {
    return this.add({ client, model: 'register', key, input: { f: 'write', value }, call, ret, output: { revision } });
  }
  cas(client: number, key: string, rev: number, value: string, [call, ret]: Times, revision: number | 'fail'): Op {
    const failed = revision === 'fail';
    return this.add({
      client,
      model: 'register',
      key,
      input: { f: 'cas', rev, value },
      call,
      ret,
      ...(failed ? { outcome: 'fail' as const, status: 412 } : { output: { revision } }),
    });
  }
  create(client: number, key: string, value: string, [call, ret]: Times, revision: number | 'fail'): Op {
    const failed = revision === 'fail';
    return this.add({
      client,
      model: 'register',
      key,
      input: { f: 'create', value },
      call,
      ret,
      ...(failed ? { outcome: 'fail' as const, status: 412 } : { output: { revision } }),
    });
  }
  delete(client: number, key: string, [call, ret]: Times, revision: number): Op {
    return this.add({ client, model: 'register', key, input: { f: 'delete' }, call, ret, output: { revision } });
  }
  increment(client: number, key: string, delta: number, [call, ret]: Times, value?: number, revision?: number): Op {
    return this.add({ client, model: 'counter', key, input: { f: 'add', delta }, call, ret, output: { value, revision } });
  }
  count(client: number, key: string, [call, ret]: Times, value: number, revision?: number): Op {
    return this.add({ client, model: 'counter', key, input: { f: 'read' }, call, ret, output: { value, revision } });
  }
  /** One multi-key request with a check per key (`{check, rev}` and a set): a cas per key, one group. */
  checkedTransaction(
    client: number,
    writes: Record<string, [rev: number, value: string]>,
    [call, ret]: Times,
    revision: number | 'fail',
  ): Op[] {
    const group = ++this.group;
    return Object.entries(writes).map(([key, [rev, value]]) =>
      this.add({
        client,
        model: 'register',
        key,
        input: { f: 'cas', rev, value },
        call,
        ret,
        group,
        ...(revision === 'fail' ? { outcome: 'fail' as const, status: 409 } : { output: { revision } }),
      }),
    );
  }
  /** One multi-key request deleting `deleted` (answered ok whether or not it was live) and writing `writes`: one revision, one group. */
  deleteAndWrite(client: number, deleted: string, writes: Record<string, string>, [call, ret]: Times, revision: number): Op[] {
    const group = ++this.group;
    return [
      this.add({ client, model: 'register', key: deleted, input: { f: 'delete' }, call, ret, group, output: { revision } }),
      ...Object.entries(writes).map(([key, value]) =>
        this.add({ client, model: 'register', key, input: { f: 'write', value }, call, ret, group, output: { revision } }),
      ),
    ];
  }
  /** One multi-key request: a write per key, one revision, one group. */
  transaction(client: number, writes: Record<string, string>, [call, ret]: Times, revision: number | 'fail'): Op[] {
    const group = ++this.group;
    return Object.entries(writes).map(([key, value]) =>
      this.add({
        client,
        model: 'register',
        key,
        input: { f: 'write', value },
        call,
        ret,
        group,
        ...(revision === 'fail' ? { outcome: 'fail' as const, status: 409 } : { output: { revision } }),
      }),
    );
  }
}

export function history(scenario: string, parts: Partial<RecordedHistory>): RecordedHistory {
  return { scenario, ops: [], watches: [], ...parts };
}

export function set(key: string, revision: number, value: string, at = 0): WatchEvent {
  return { revision, key, kind: 'set', value, at };
}
export function del(key: string, revision: number, at = 0): WatchEvent {
  return { revision, key, kind: 'delete', at };
}

/** Writes x=1 (rev 1), y=2 (rev 2), a transaction x=3,y=4 (rev 3), z=5 (rev 4), delete x (rev 5). */
export function watchedWrites(): Op[] {
  const h = new Ops();
  h.write(1, 'x', '1', [0, 5], 1);
  h.write(1, 'y', '2', [6, 10], 2);
  h.transaction(1, { x: '3', y: '4' }, [11, 15], 3);
  h.write(1, 'z', '5', [16, 20], 4);
  h.delete(1, 'x', [21, 25], 5);
  return h.ops;
}
export const allWatchedEvents = (): WatchEvent[] => [
  set('x', 1, '1'),
  set('y', 2, '2'),
  set('x', 3, '3'),
  set('y', 3, '4'),
  set('z', 4, '5'),
  del('x', 5),
];

export function watcher(watcherId: number, segments: WatchLog['segments'], caughtUpTo?: number): WatchLog {
  return { watcher: watcherId, segments, ...(caughtUpTo === undefined ? {} : { caughtUpTo }) };
}

export function bankRead(revision: number, balances: Record<string, number>, call: number, ret: number): BankRead {
  return { revision, balances, call, ret };
}

export function fenced(holder: number, token: number, revision: number, call: number, ret: number): FencedWrite {
  return { holder, token, revision, outcome: 'ok', call, ret };
}
