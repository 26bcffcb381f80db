import type { Store } from './store.js';

/** The storage operations whose latency is measured: a small fixed set, so label cardinality stays bounded. */
export const STORE_OPS = ['get', 'set', 'delete', 'update', 'list', 'commit', 'bucket_read', 'bucket_write', 'count'] as const;
export type StoreOp = (typeof STORE_OPS)[number];

/** Receives one storage operation's duration in seconds. */
export type ObserveOp = (op: StoreOp, seconds: number) => void;

/**
 * Which Store methods are timed, under which operation. Whole-bucket work (export, import, dump,
 * integrity) is long by nature, and the watch feed, sweeper and pruning run in the background,
 * not on a request's path: those pass through untimed, like every property.
 */
const TIMED: { [M in keyof Store]?: StoreOp } = {
  getEntry: 'get',
  getEntryNow: 'get',
  readAt: 'get',
  setEntry: 'set',
  deleteEntry: 'delete',
  updateEntry: 'update',
  commit: 'commit',
  listEntries: 'list',
  listAt: 'list',
  keyHistory: 'list',
  getBucket: 'bucket_read',
  bucketRevision: 'bucket_read',
  bucketUsage: 'bucket_read',
  createBucket: 'bucket_write',
  updateBucket: 'bucket_write',
  deleteBucket: 'bucket_write',
  countEntries: 'count',
  countBuckets: 'count',
};

/** `run`, reporting how long it took (failed calls included); a synchronous one stays synchronous. */
function timed(op: StoreOp, observe: ObserveOp, run: (...args: unknown[]) => unknown): (...args: unknown[]) => unknown {
  return (...args) => {
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
 * A Store that reports how long each operation in TIMED took and otherwise passes everything
 * through unchanged: methods are bound to the store (and wrapped once, on first use), properties
 * read from it, so the wrapper never restates the interface.
 */
export function timedStore(inner: Store, observe: ObserveOp): Store {
  const methods = new Map<PropertyKey, unknown>();
  return new Proxy(inner, {
    get(target, name) {
      const member = Reflect.get(target, name, target) as unknown;
      if (typeof member !== 'function') return member;
      let method = methods.get(name);
      if (method === undefined) {
        const bound = (member as (...args: unknown[]) => unknown).bind(target);
        const op = TIMED[name as keyof Store];
        method = op ? timed(op, observe, bound) : bound;
        methods.set(name, method);
      }
      return method;
    },
  });
}
