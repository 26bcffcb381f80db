import { type KeyRole, type PolicyFlags } from '../auth/access.js';
import type { TokenClaims } from '../auth/tokens.js';
import type { BucketRecord, Store } from '../store/store.js';

/** A bucket's record plus the verification results computed against exactly this record. */
export interface CachedBucket {
  record: BucketRecord;
  flags: PolicyFlags;
  loadedAt: number;
  /** Credential digest -> roles it matched (empty set: matched nothing). */
  keyRoles: Map<string, ReadonlySet<KeyRole>>;
  /** Token -> verified claims, or null when it failed verification. */
  tokens: Map<string, TokenClaims | null>;
}

const MAX_BUCKETS = 10_000;
/** Per bucket: beyond this many distinct credentials or tokens, the maps start over. */
export const MAX_VERIFICATIONS = 1_000;

/**
 * Bucket policies and credential checks, cached so the hot path does no slow hashing.
 * On this instance, every change goes through `invalidate`, so a rotated key or a deleted
 * bucket is never served. When the store is shared with other instances, entries also expire
 * after `maxAgeMs`, which bounds how long another instance's change can go unseen.
 */
export class BucketCache {
  private readonly entries = new Map<string, CachedBucket>();
  /**
   * Loads under way, one per bucket: concurrent misses share one query. Without this, every
   * request in flight when a shared store's entry expired queried the bucket at once, and under
   * load (hundreds of concurrent writes per instance) they queued past the pool's connection
   * timeout and were answered 503.
   */
  private readonly loading = new Map<string, Promise<CachedBucket | undefined>>();

  constructor(
    private readonly store: Store,
    private readonly maxAgeMs: number,
  ) {}

  /** The bucket when it is cached and fresh; undefined when `get` would have to load it. */
  peek(id: string): CachedBucket | undefined {
    const hit = this.entries.get(id);
    return hit && Date.now() - hit.loadedAt < this.maxAgeMs ? hit : undefined;
  }

  async get(id: string): Promise<CachedBucket | undefined> {
    const hit = this.entries.get(id);
    if (hit && Date.now() - hit.loadedAt < this.maxAgeMs) return hit;
    const running = this.loading.get(id);
    if (running) return running;
    const load: Promise<CachedBucket | undefined> = this.load(id, hit, () => this.loading.get(id) === load).finally(() => {
      if (this.loading.get(id) === load) this.loading.delete(id);
    });
    this.loading.set(id, load);
    return load;
  }

  /** `isCurrent`: false when the bucket was invalidated while it loaded. */
  private async load(id: string, hit: CachedBucket | undefined, isCurrent: () => boolean): Promise<CachedBucket | undefined> {
    const now = Date.now();
    const record = await this.store.getBucket(id);
    // Invalidated while loading: answer this read, but cache nothing (the change may postdate it).
    const current = isCurrent();
    if (!record) {
      if (current) this.entries.delete(id);
      return undefined;
    }
    const cached: CachedBucket = {
      record,
      flags: {
        hasSecretKey: record.secretKeyHash !== null,
        hasReadKey: record.readKeyHash !== null,
        hasWriteKey: record.writeKeyHash !== null,
      },
      loadedAt: now,
      // Verification results are pure functions of the credential and these fields: when a reload
      // (every maxAgeMs on a shared store) finds them unchanged, the slow checks are not redone.
      keyRoles: hit && sameKeyHashes(hit.record, record) ? hit.keyRoles : new Map(),
      tokens: hit && hit.record.signingKey === record.signingKey && hit.record.tokenSalt === record.tokenSalt ? hit.tokens : new Map(),
    };
    if (!current) return cached;
    if (this.entries.size >= MAX_BUCKETS) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(id, cached);
    return cached;
  }

  /** Drops a bucket, verification results included (this instance changed or deleted it). */
  invalidate(id: string): void {
    this.entries.delete(id);
    this.loading.delete(id);
  }
}

const sameKeyHashes = (a: BucketRecord, b: BucketRecord) =>
  a.secretKeyHash === b.secretKeyHash && a.readKeyHash === b.readKeyHash && a.writeKeyHash === b.writeKeyHash;
