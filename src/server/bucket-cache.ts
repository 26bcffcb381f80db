import type { Socket } from 'node:net';
import type { KeyRole, PolicyFlags } from '../auth/access.js';
import type { TokenClaims } from '../auth/tokens.js';
import { VerificationScheduler } from '../auth/verification-scheduler.js';
import type { BucketRecord, Store } from '../store/store.js';
import type { Clock } from './clock.js';
import { verificationLimits } from './crypto-threads.js';
import { DEFAULT_SERVER_CONFIG } from './server-config.js';

/** A bucket's record plus the verification results computed against exactly this record. */
export interface CachedBucket {
  record: BucketRecord;
  flags: PolicyFlags;
  loadedAt: number;
  /** Credential digest -> roles it matched (never empty). */
  keyRoles: Map<string, ReadonlySet<KeyRole>>;
  /** Credential digest -> the empty set, for credentials that matched nothing (kept apart: see access-control.ts). */
  wrongCredentials: Map<string, ReadonlySet<KeyRole>>;
  /** Token -> verified claims, or null when it failed verification. */
  tokens: Map<string, TokenClaims | null>;
  /** Credential digest -> its verification under way: concurrent requests share one. */
  verifying: Map<string, Verifying>;
}

/** A credential's verification under way (see access-control.ts). */
export interface Verifying {
  result: Promise<ReadonlySet<KeyRole>>;
  /** The connections waiting for it: when all are gone before it starts, it is skipped. */
  waiters: Set<Socket | undefined>;
}

const MAX_BUCKETS = 10_000;
/** Per bucket: beyond this many distinct right credentials, wrong ones or tokens, that map starts over. */
export const MAX_VERIFICATIONS = 1_000;

/**
 * Bucket policies and credential checks, cached so the hot path does no slow hashing.
 * On this instance, every change goes through `invalidate`, so a rotated key or a deleted
 * bucket is never served. When the store is shared with other instances, entries also expire
 * after `maxAgeMs`, which bounds how long another instance's change can go unseen.
 */
export class BucketCache {
  private readonly entries = new Map<string, CachedBucket>();
  private readonly loading = new Map<string, Promise<CachedBucket | undefined>>();
  private invalidations = 0;

  /**
   * @param verifications this instance's slow-hash queue, shared by all its buckets (each app has
   * its own: two apps in one process do not queue behind each other).
   * @param clock the app's time: entries' age, and tokens' expiry (access-control.ts)
   */
  constructor(
    private readonly store: Store,
    private readonly maxAgeMs: number,
    readonly verifications = new VerificationScheduler(verificationLimits(DEFAULT_SERVER_CONFIG.verificationWaitSeconds)),
    readonly clock: Clock = Date.now,
  ) {}

  /** The bucket when it is cached and fresh; undefined when `get` would have to load it. */
  peek(id: string): CachedBucket | undefined {
    const hit = this.entries.get(id);
    return hit && this.clock() - hit.loadedAt < this.maxAgeMs ? hit : undefined;
  }

  get(id: string): Promise<CachedBucket | undefined> {
    const hit = this.entries.get(id);
    if (hit && this.clock() - hit.loadedAt < this.maxAgeMs) return Promise.resolve(hit);
    // Concurrent first requests for a bucket (a restart, a burst) share one load: 500 at once
    // were 500 queries queued for the pool, and the last ones timed out waiting (503).
    let loading = this.loading.get(id);
    if (!loading) {
      const started = this.load(id).finally(() => {
        if (this.loading.get(id) === started) this.loading.delete(id);
      });
      this.loading.set(id, (loading = started));
    }
    return loading;
  }

  private async load(id: string): Promise<CachedBucket | undefined> {
    const now = this.clock();
    const invalidations = this.invalidations;
    const record = await this.store.buckets.get(id);
    // A change on this instance while the record was read: answer with it, but do not cache it.
    const stale = invalidations !== this.invalidations;
    const hit = this.entries.get(id);
    if (!record) {
      if (!stale) this.entries.delete(id);
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
      wrongCredentials: hit && sameKeyHashes(hit.record, record) ? hit.wrongCredentials : new Map(),
      tokens: hit && hit.record.signingKey === record.signingKey && hit.record.tokenSalt === record.tokenSalt ? hit.tokens : new Map(),
      verifying: hit && sameKeyHashes(hit.record, record) ? hit.verifying : new Map(),
    };
    if (stale) return cached;
    if (this.entries.size >= MAX_BUCKETS) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(id, cached);
    return cached;
  }

  /** Drops a bucket, verification results included (this instance changed or deleted it). */
  invalidate(id: string): void {
    this.entries.delete(id);
    // A load under way may have read the record before the change: the next get reads it again.
    this.loading.delete(id);
    this.invalidations++;
  }
}

const sameKeyHashes = (a: BucketRecord, b: BucketRecord) =>
  a.secretKeyHash === b.secretKeyHash && a.readKeyHash === b.readKeyHash && a.writeKeyHash === b.writeKeyHash;
