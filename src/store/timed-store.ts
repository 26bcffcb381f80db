import type { WriteOp } from './core/write-ops.js';
import type { Store } from './store.js';

/** The storage operations whose latency is measured: a small fixed set, so label cardinality stays bounded. */
export const STORE_OPS = ['get', 'set', 'delete', 'update', 'list', 'commit', 'bucket_read', 'bucket_write', 'count'] as const;
export type StoreOp = (typeof STORE_OPS)[number];

/** Receives one storage operation's duration in seconds. */
export type ObserveOp = (op: StoreOp, seconds: number) => void;

/**
 * Each write is timed under its kind; a counter's label predates the op's name and stays 'update'.
 * A sweep is a delete (the sweeper itself goes through `maintenance`, untimed, like all background work).
 */
const WRITE_OPS: { [K in WriteOp['op']]: StoreOp } = { set: 'set', delete: 'delete', counter: 'update', commit: 'commit', sweep: 'delete' };

/**
 * Which members are timed, under which operation: an operation, a function of the call's
 * arguments that picks one, or, for a group of methods (`buckets`, `history`, …), a table of its own.
 */
type TimedTable<T> = {
  [M in keyof T]?: NonNullable<T[M]> extends (...args: infer A) => unknown
    ? StoreOp | ((...args: A) => StoreOp)
    : TimedTable<NonNullable<T[M]>>;
};

/**
 * Whole-bucket work (export, import, dump, integrity) is long by nature, and the watch feed,
 * sweeper and pruning run in the background, not on a request's path: those pass through
 * untimed, like every property.
 */
const TIMED: TimedTable<Store> = {
  getEntry: 'get',
  getEntryNow: 'get',
  listEntries: 'list',
  write: (_bucket, op) => WRITE_OPS[op.op],
  buckets: {
    get: 'bucket_read',
    revision: 'bucket_read',
    usage: 'bucket_read',
    create: 'bucket_write',
    update: 'bucket_write',
    delete: 'bucket_write',
    count: 'count',
  },
  history: { readAt: 'get', listAt: 'list', keyHistory: 'list', bucketLog: 'list' },
  maintenance: { countEntries: 'count' },
};

type Method = (...args: unknown[]) => unknown;
type OpOf = StoreOp | Method;
interface Table {
  [name: PropertyKey]: OpOf | Table | undefined;
}

/** `run`, reporting how long it took (failed calls included); a synchronous one stays synchronous. */
function timed(opOf: OpOf, observe: ObserveOp, run: Method): Method {
  return (...args) => {
    const op = typeof opOf === 'function' ? (opOf(...args) as StoreOp) : opOf;
    const start = performance.now();
    const done = () => observe(op, (performance.now() - start) / 1000);
    let result: unknown;
    try {
      result = run(...args);
    } catch (err) {
      done();
      throw err;
    }
    if (result instanceof Promise) return result.finally(done);
    done();
    return result;
  };
}

/**
 * `inner` behind a Proxy: methods in `table` are timed, groups in it get a Proxy of their own, and
 * everything else passes through. Methods are bound to their object (and wrapped once, on first
 * use), so the wrapper never restates the interface.
 */
function timedObject<T extends object>(inner: T, table: Table, observe: ObserveOp): T {
  const members = new Map<PropertyKey, unknown>();
  return new Proxy(inner, {
    get(target, name) {
      const member = Reflect.get(target, name, target) as unknown;
      const entry = table[name];
      const wraps = typeof member === 'function' || (entry !== undefined && typeof entry === 'object' && typeof member === 'object');
      if (!wraps || member === null) return member;
      let wrapped = members.get(name);
      if (wrapped === undefined) {
        if (typeof member === 'function') {
          const bound = (member as Method).bind(target);
          wrapped = entry === undefined || typeof entry === 'object' ? bound : timed(entry, observe, bound);
        } else {
          wrapped = timedObject(member as object, entry as Table, observe);
        }
        members.set(name, wrapped);
      }
      return wrapped;
    },
  });
}

/** A Store that reports how long each operation in TIMED took and otherwise passes everything through unchanged. */
export function timedStore(inner: Store, observe: ObserveOp): Store {
  return timedObject(inner, TIMED as Table, observe);
}
