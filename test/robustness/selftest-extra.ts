import type { CredentialHistory } from './history-credentials.js';
import type { Op, RecordedHistory, WatchEvent } from './history.js';
import type { SelftestCase } from './selftest.js';
import { Ops, history, set, watcher } from './selftest-builders.js';
import { typedName } from './typed-values.js';

/**
 * The self-test's cases for the extra workloads' rules (selftest.ts runs them with the others):
 * expiring keys in the key model, the sweeper's `expire` events, scoped watchers, typed values and
 * temporary tokens, each a history that must pass and histories that must fail in the checker
 * meant to catch them.
 */
const ok = (name: string, parts: Partial<RecordedHistory>): SelftestCase => ({ name, expected: 'ok', history: history(name, parts) });
const bad = (name: string, checker: string, parts: Partial<RecordedHistory>): SelftestCase => ({
  name,
  expected: 'anomaly',
  checker,
  history: history(name, parts),
});

/** Gives a write the TTL it asked and, when answered with one, its expiry. */
function expiring(op: Op, ttl: number, expiresAt?: number): Op {
  (op.input as { ttl?: number }).ttl = ttl;
  if (expiresAt !== undefined && op.output) (op.output as { expiresAt?: number }).expiresAt = expiresAt;
  return op;
}

/** x = "a" with a 1 s TTL, answered at 5 with its expiry at 1005. */
function expiringWrite(h: Ops): void {
  expiring(h.write(1, 'x', 'a', [0, 5], 1), 1, 1005);
}

function failedDelete(h: Ops, [call, ret]: [number, number], status = 404): void {
  const op = h.delete(2, 'x', [call, ret], 0);
  op.outcome = 'fail';
  op.status = status;
  delete op.output;
}

const expire = (key: string, revision: number, at: number): WatchEvent => ({ revision, key, kind: 'expire', at });
const expiringSet = (key: string, revision: number, value: string, expiresAt: number, at: number): WatchEvent => ({
  ...set(key, revision, value, at),
  expiresAt,
});

function expiryCases(): SelftestCase[] {
  const cases: SelftestCase[] = [];
  {
    const h = new Ops();
    expiringWrite(h);
    h.read(2, 'x', [100, 110], 'a', 1);
    h.read(3, 'x', [1100, 1110], null); // expired, swept or not
    failedDelete(h, [1200, 1210]); // its DELETE: 404, nothing written
    expiring(h.create(2, 'x', 'b', [1300, 1310], 2), 1, 2310); // If-None-Match: * over the expired value
    h.read(3, 'x', [1400, 1410], 'b', 2);
    cases.push(ok('expiry: live before its expiry, absent after, its DELETE refused, a create over it', { ops: h.ops }));
  }
  {
    // Answered without an expiry header: it lies in [1000, 1040]; reads in that window may go either way.
    const h = new Ops();
    expiring(h.write(1, 'x', 'a', [0, 40], 1), 1);
    h.read(2, 'x', [1010, 1020], null);
    h.read(3, 'x', [1015, 1025], 'a', 1);
    cases.push(ok('expiry: reads racing the expiry inside the window the clock cannot settle', { ops: h.ops }));
  }
  {
    // The feed shows set a, set b with no expire between: b's create came over the expired, unswept a.
    const h = new Ops();
    expiringWrite(h);
    h.create(2, 'x', 'b', [1100, Number.POSITIVE_INFINITY], 'fail');
    h.read(3, 'x', [1300, 1310], 'b', 2);
    const events = [{ ...set('x', 1, 'a', 6), expiresAt: 1005 }, set('x', 2, 'b', 1200)];
    cases.push(
      ok('expiry: an unanswered create over an expired, unswept value, which the feed shows', {
        ops: h.ops,
        watches: [watcher(1, [{ instance: 'a', since: 0, events }], 2)],
      }),
    );
  }
  {
    const h = new Ops();
    expiringWrite(h);
    h.read(2, 'x', [1200, 1210], 'a', 1);
    cases.push(bad('expiry: an expired key read with its value', 'linearizability', { ops: h.ops }));
  }
  {
    const h = new Ops();
    expiringWrite(h);
    h.read(2, 'x', [500, 510], null);
    cases.push(bad('expiry: a key absent before its expiry', 'linearizability', { ops: h.ops }));
  }
  {
    const h = new Ops();
    expiringWrite(h);
    h.delete(2, 'x', [1200, 1210], 2);
    cases.push(bad('expiry: a DELETE of an expired key answered 204', 'linearizability', { ops: h.ops }));
  }
  {
    // Expiry in [1000, 1400]; a read at 1110 found it gone, so it was gone by 1110: it cannot be live at 1200.
    const h = new Ops();
    expiring(h.write(1, 'x', 'a', [0, 400], 1), 1);
    h.read(2, 'x', [1100, 1110], null);
    h.read(3, 'x', [1200, 1210], 'a', 1);
    cases.push(bad('expiry: a key live again after a read found it expired', 'linearizability', { ops: h.ops }));
  }
  {
    const h = new Ops();
    expiringWrite(h);
    h.cas(2, 'x', 1, 'b', [1200, 1210], 2);
    cases.push(bad('expiry: a compare-and-set of an expired key applied', 'linearizability', { ops: h.ops }));
  }
  return cases;
}

function expireEventCases(): SelftestCase[] {
  const ops = (): Op[] => {
    const h = new Ops();
    expiringWrite(h);
    return h.ops;
  };
  const settled = { settledAt: 20_000, sweepBoundMs: 10_000 };
  const feed = (events: WatchEvent[], caughtUpTo = 2) => [watcher(1, [{ instance: 'a', since: 0, events }], caughtUpTo)];
  return [
    ok("expire: the sweeper's expire after the key's expiry, at a revision of its own", {
      ops: ops(),
      watches: feed([expiringSet('x', 1, 'a', 1005, 6), expire('x', 2, 1500)]),
      expiry: settled,
    }),
    // A set over an expired value the sweeper had not reached: the set replaces the row, so no expire is recorded for
    // the old value; its set event's expires_at already said when it stopped being live.
    ok('expire: a set over an expired, unswept value, with no expire between', {
      ops: (() => {
        const h = new Ops();
        expiringWrite(h);
        h.write(2, 'x', 'b', [1300, 1310], 2);
        return h.ops;
      })(),
      watches: feed([expiringSet('x', 1, 'a', 1005, 6), set('x', 2, 'b', 1309)]),
      expiry: settled,
    }),
    bad('expire: an expire event before the key expired', 'watch-expire', {
      ops: ops(),
      watches: feed([expiringSet('x', 1, 'a', 1005, 6), expire('x', 2, 500)]),
    }),
    bad('expire: an expire of a key written without an expiry', 'watch-expire', {
      ops: new Ops().ops,
      watches: feed([set('x', 1, 'a', 6), expire('x', 2, 1500)]),
    }),
    bad('expire: a set event without the expiry its write asked for', 'watch-expire', {
      ops: ops(),
      watches: feed([set('x', 1, 'a', 6)], 1),
    }),
    bad('expire: an expired key the sweeper never recorded', 'watch-expire', {
      ops: ops(),
      watches: feed([expiringSet('x', 1, 'a', 1005, 6)], 1),
      expiry: settled,
    }),
  ];
}

function scopedCases(): SelftestCase[] {
  const ops = (): Op[] => {
    const h = new Ops();
    h.write(1, 'v/a', '1', [0, 5], 1);
    h.write(1, 'r/0', '2', [6, 10], 2);
    h.write(1, 'v/b', '3', [11, 15], 3);
    return h.ops;
  };
  const prefixed = (events: WatchEvent[]) => [{ ...watcher(1, [{ instance: 'a', since: 0, events }], 3), prefix: 'v/' }];
  return [
    ok('scoped: a prefix watcher sees exactly the events under its prefix', {
      ops: ops(),
      watches: prefixed([set('v/a', 1, '1'), set('v/b', 3, '3')]),
    }),
    bad('scoped: a prefix watcher given an event outside its prefix', 'watch-scoped', {
      ops: ops(),
      watches: prefixed([set('v/a', 1, '1'), set('r/0', 2, '2'), set('v/b', 3, '3')]),
    }),
    bad('scoped: a token watcher given a key its token may not read', 'watch-scoped', {
      ops: ops(),
      watches: [
        { ...watcher(1, [{ instance: 'a', since: 0, events: [set('v/a', 1, '1'), set('r/0', 2, '2')] }]), prefix: 'v/', tokenPrefix: 'v/' },
      ],
    }),
    bad('scoped: a prefix watcher missing a change under its prefix', 'watch-reliable', {
      ops: ops(),
      watches: prefixed([set('v/b', 3, '3')]),
    }),
  ];
}

function typedCases(): SelftestCase[] {
  const bytes = typedName('bytes', Buffer.from([0xff, 0x00, 0x61]));
  const asText = typedName('text', Buffer.from([0xff, 0x00, 0x61]));
  const oneByteOff = typedName('bytes', Buffer.from([0xff, 0x00, 0x62]));
  const reading = (value: string) => {
    const h = new Ops();
    h.write(1, 'v/0', bytes, [0, 5], 1);
    h.read(2, 'v/0', [10, 15], value, 1);
    return h.ops;
  };
  return [
    ok('values: bytes read back as the same type and bytes', { ops: reading(bytes) }),
    bad('values: bytes read back as text', 'linearizability', { ops: reading(asText) }),
    bad('values: bytes read back with one byte changed', 'linearizability', { ops: reading(oneByteOff) }),
  ];
}

/** Token 0 (generation 0) expires at 2000; the rotation to generation 1 on instance a is answered at 3010; token 1 (generation 0) is minted before it. */
function credentials(uses: CredentialHistory['uses']): CredentialHistory {
  return {
    tokens: [
      { generation: 0, expiresAt: 2000, minted: 50 },
      { generation: 0, expiresAt: 9000, minted: 2500 },
      { generation: 1, expiresAt: 9000, minted: 3050 },
    ],
    rotations: [{ generation: 1, instance: 'a', call: 3000, ret: 3010 }],
    uses,
    propagationMs: 1500,
  };
}
const use = (token: number, instance: string, call: number, status: number) => ({
  token,
  client: 1,
  instance,
  call,
  ret: call + 10,
  status,
});

function credentialCases(): SelftestCase[] {
  return [
    ok('credentials: valid tokens served, expired and revoked ones refused, a revoked one served elsewhere within the cache bound', {
      credentials: credentials([
        use(0, 'a', 100, 200),
        use(0, 'a', 2100, 401),
        use(1, 'a', 2600, 200),
        use(1, 'a', 3020, 401),
        use(1, 'b', 3100, 200),
        use(2, 'b', 3200, 404),
        use(2, 'b', 3300, 401), // signed with the new key: b may not know it for the cache's 1 s
      ]),
    }),
    bad('credentials: a valid token refused', 'credentials', { credentials: credentials([use(0, 'a', 100, 401)]) }),
    bad('credentials: a token of the new generation refused past the cache bound', 'credentials', {
      credentials: credentials([use(2, 'b', 4600, 401)]),
    }),
    bad('credentials: an expired token served', 'credentials', { credentials: credentials([use(0, 'a', 2100, 200)]) }),
    bad('credentials: a revoked token served by the instance that rotated', 'credentials', {
      credentials: credentials([use(1, 'a', 3100, 200)]),
    }),
    bad('credentials: a revoked token served by another instance past the cache bound', 'credentials', {
      credentials: credentials([use(1, 'b', 4600, 204)]),
    }),
  ];
}

export function extraSelftestCases(): SelftestCase[] {
  return [...expiryCases(), ...expireEventCases(), ...scopedCases(), ...typedCases(), ...credentialCases()];
}
