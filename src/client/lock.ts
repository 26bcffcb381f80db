/**
 * A lock for scripts, like `etcdctl lock` and `consul lock`: the lock is a key created with
 * If-None-Match: * and a TTL, renewed (If-Match on its revision) while held, deleted on release.
 * A waiter sleeps on the watch feed until the key changes or its expiry passes, so a holder that
 * dies without releasing holds it at most one TTL.
 *
 * A lock alone cannot keep two holders apart: one paused past its TTL still believes it holds the
 * lock while another has taken it. Its `token` fences that: the lock key's create revision, which
 * only grows from one holder to the next and stays fixed across renewals. A write made with
 * `atomic().fence(lock)` commits only while the key still has that create revision (etcd's
 * CreateRevision, as its lock recipes use it).
 */
import { NotFoundError, PreconditionFailedError } from './client-errors.js';
import type { CallOptions, KvbHttp, ValueRead } from './kvb-http.js';
import { watchFeed } from './watch-feed.js';

export const DEFAULT_LOCK_TTL = 15;

export interface LockOptions extends CallOptions {
  /** Seconds the lock outlives its holder's last renewal (renewed every third of it). Default 15. */
  ttl?: number | undefined;
  /** Stored as the lock key's value (text); default a random id. Two holders must not share one. */
  owner?: string | undefined;
}

/** A lock key and the token it was acquired with: what `atomic().fence()` checks. */
export interface FencingToken {
  /** The lock key. */
  readonly name: string;
  /** The lock key's create revision when it was acquired. */
  readonly token: number;
}

/** A held lock. */
export interface Lock extends FencingToken {
  readonly owner: string;
  /**
   * The fencing token: the revision of the acquiring write, which is the lock key's create
   * revision. It stays the same across renewals, and every later holder's is larger. Pass the lock
   * to `atomic().fence(lock)` (or send `{"check": name, "created": token}`) so a write commits
   * only while this holder still holds the lock.
   */
  readonly token: number;
  /** The revision of the lock key's last write (acquire or renewal). */
  readonly revision: number;
  /** Aborted when the lock is lost: a renewal found another holder, or could not reach the server for a whole TTL. */
  readonly lost: AbortSignal;
  /** Stops renewing and deletes the lock key (if it is still this holder's). */
  release(): Promise<void>;
}

const decoder = new TextDecoder();

function randomOwner(): string {
  const c = (globalThis as { crypto?: { randomUUID?: () => string } }).crypto;
  return c?.randomUUID ? c.randomUUID() : `${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}`;
}

async function readLock(http: KvbHttp, bucket: string, name: string, options: CallOptions): Promise<ValueRead | null> {
  try {
    return await http.get(bucket, name, { ...options, createRevision: true });
  } catch (err) {
    if (err instanceof NotFoundError) return null;
    throw err;
  }
}

/**
 * Waits until the lock key may be free: a change of the key in the watch feed, or its expiry.
 * Returns on either (the caller tries again); never decides that the lock is free by itself.
 */
async function untilChanged(http: KvbHttp, bucket: string, name: string, held: ValueRead, signal: AbortSignal | undefined): Promise<void> {
  const controller = new AbortController();
  const stop = () => controller.abort(new Error('stop'));
  signal?.addEventListener('abort', stop, { once: true });
  // The key expires by itself at expiresAt even when nothing reports it (expiry is lazy).
  const expires = held.expiresAt ? Date.parse(held.expiresAt) - Date.now() + 50 : undefined;
  const timer = expires === undefined ? undefined : setTimeout(stop, Math.max(0, expires));
  try {
    for await (const event of watchFeed(http, bucket, { prefix: name, since: held.revision, signal: controller.signal })) {
      if (event.key === name) break;
    }
  } catch {
    // Aborted (expiry, caller) or the feed failed (a reset, the server away): either way, try the
    // lock again; after a failure not too soon, so a feed that keeps failing is no busy loop.
    if (!controller.signal.aborted) await new Promise((resolve) => setTimeout(resolve, 250 + Math.random() * 750));
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener('abort', stop);
    controller.abort(new Error('done'));
  }
  signal?.throwIfAborted();
}

/** Acquires `name`, waiting while another holder has it; rejects only on an error or `options.signal`. */
export async function acquireLock(http: KvbHttp, bucket: string, name: string, options: LockOptions = {}): Promise<Lock> {
  const ttl = options.ttl ?? DEFAULT_LOCK_TTL;
  if (!Number.isInteger(ttl) || ttl < 1) throw new RangeError(`a lock's ttl is whole seconds >= 1, not ${ttl}`);
  const owner = options.owner ?? randomOwner();
  const call: CallOptions = { signal: options.signal, timeoutMs: options.timeoutMs };
  for (;;) {
    options.signal?.throwIfAborted();
    try {
      const read = await http.set(bucket, name, owner, { ...call, contentType: 'text/plain', ttl, condition: { ifAbsent: true } });
      // The write that made the key live is its creation: its revision is the create revision.
      return new HeldLock(http, bucket, name, owner, ttl, read.revision ?? 0, read.revision ?? 0, call);
    } catch (err) {
      if (!(err instanceof PreconditionFailedError)) throw err;
    }
    const current = await readLock(http, bucket, name, call);
    if (!current) continue;
    // An acquire whose answer was lost and then retried finds its own write, and the token that write got.
    if (decoder.decode(current.data) === owner) {
      if (current.createRevision === undefined)
        throw new Error(`the server did not answer lock ${JSON.stringify(name)}'s create revision (Kvb-Create-Revision)`);
      return new HeldLock(http, bucket, name, owner, ttl, current.revision ?? 0, current.createRevision, call);
    }
    await untilChanged(http, bucket, name, current, options.signal);
  }
}

class HeldLock implements Lock {
  private readonly controller = new AbortController();
  private timer: ReturnType<typeof setTimeout> | undefined;
  /** Fires when the key would expire unrenewed: the holder must not believe it still holds it. */
  private expiry: ReturnType<typeof setTimeout> | undefined;
  private released = false;
  /** When the key expires unless renewed (ms), as of the last successful write. */
  private deadline: number;

  constructor(
    private readonly http: KvbHttp,
    private readonly bucket: string,
    readonly name: string,
    readonly owner: string,
    private readonly ttl: number,
    public revision: number,
    readonly token: number,
    private readonly call: CallOptions,
  ) {
    this.deadline = Date.now() + ttl * 1000;
    this.renewed();
    this.schedule();
  }

  private renewed(): void {
    clearTimeout(this.expiry);
    this.expiry = setTimeout(() => this.lose(`not renewed within its ${this.ttl}s TTL`), Math.max(0, this.deadline - Date.now()));
  }

  get lost(): AbortSignal {
    return this.controller.signal;
  }

  private schedule(): void {
    this.timer = setTimeout(() => void this.renew(), (this.ttl * 1000) / 3);
  }

  private lose(reason: string): void {
    clearTimeout(this.timer);
    clearTimeout(this.expiry);
    if (!this.controller.signal.aborted) this.controller.abort(new Error(`lock ${JSON.stringify(this.name)} lost: ${reason}`));
  }

  private async renew(): Promise<void> {
    if (this.released) return;
    try {
      const read = await this.http.set(this.bucket, this.name, this.owner, {
        timeoutMs: this.call.timeoutMs,
        contentType: 'text/plain',
        ttl: this.ttl,
        condition: { ifRevision: this.revision },
      });
      this.revision = read.revision ?? this.revision;
      this.deadline = Date.now() + this.ttl * 1000;
      this.renewed();
    } catch (err) {
      if (err instanceof PreconditionFailedError) {
        // A renewal retried after its answer was lost finds its own write; anything else is another holder.
        const current = await readLock(this.http, this.bucket, this.name, this.call).catch(() => null);
        if (!current || decoder.decode(current.data) !== this.owner || current.createRevision !== this.token) {
          return this.lose('another holder took it (or it expired)');
        }
        this.revision = current.revision ?? this.revision;
        this.deadline = current.expiresAt ? Date.parse(current.expiresAt) : this.deadline;
        this.renewed();
      } else if (Date.now() >= this.deadline) {
        return this.lose(`the server could not be reached for ${this.ttl}s (${(err as Error).message})`);
      }
    }
    if (!this.released && !this.controller.signal.aborted) this.schedule();
  }

  async release(): Promise<void> {
    if (this.released) return;
    this.released = true;
    clearTimeout(this.timer);
    clearTimeout(this.expiry);
    if (this.controller.signal.aborted) return;
    try {
      await this.http.del(this.bucket, this.name, { ifRevision: this.revision }, this.call);
    } catch (err) {
      // Already gone or taken over: nothing of ours to delete.
      if (!(err instanceof PreconditionFailedError) && !(err instanceof NotFoundError)) throw err;
    }
  }
}
