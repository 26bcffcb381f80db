import { type Hash, createHash } from 'node:crypto';
import { badRequest } from '../errors.js';
import { entryLine, parseExportLine } from '../values/export-format.js';
import { MAX_VALUE_BYTES_CEILING } from '../limits.js';
import { NO_SECRET_REASON, type WebhookLine, webhookDumpLine, webhookFromDump } from './dump-webhooks.js';
import { BUCKET_FIELDS, type BucketColumns, bucketFromRow, bucketToRow, hasColumnKind } from './bucket-columns.js';
import type { BucketRecord, KeyedEntry, Store } from './store.js';
import type { RestoredWebhook } from './webhook-types.js';

/**
 * A whole store as NDJSON, for `kvb db dump|restore`: a header, then each bucket's policy line
 * (credential hashes, signing key, generation, default TTL, email) followed by its entries in
 * the export format and its webhooks (dump-webhooks.ts: their secrets sealed or left out), then an
 * end line with the counts and the SHA-256 of every preceding line.
 * It holds signing keys: whoever reads a dump can mint tokens for every bucket in it.
 */
export const DUMP_VERSION = 4;
/**
 * Older versions are still read: version 1 (before revisions) restores its buckets at revision 0;
 * version 2 (before create revisions) gives each key its revision as its create revision;
 * version 3 (before webhooks) restores its buckets without any.
 */
const READABLE_VERSIONS = [1, 2, 3, 4];
const BATCH = 1000;

/** A bucket's line: its policy columns as the table names them, and its revision. */
type BucketLine = { kvb: 'bucket' } & Omit<BucketColumns, 'token_salt'> & {
    /** The bucket's revision (version 2): a restored bucket continues its sequence. */
    revision?: number;
    /** The salt tokens are signed with (secret like the signing key): moved along, earlier tokens keep working. */
    token_salt?: string | null;
  };

/**
 * Columns a dump from before them does not hold, with what a restore gives them: a bucket without
 * a token salt gets one the first time its signing key is set.
 */
const ADDED_LATER: Partial<BucketColumns> = { token_salt: null };

/** A bucket as dumped: its policy and its revision. */
interface DumpedBucket {
  bucket: BucketRecord;
  revision: number;
}

function bucketLine(b: BucketRecord, revision: number): string {
  // The salt was added after the revision, so it stays last: a dump reads as it always did.
  const { token_salt, ...policy } = bucketToRow(b);
  return `${JSON.stringify({ kvb: 'bucket', ...policy, revision, token_salt } satisfies BucketLine)}\n`;
}

function bucketFrom(line: BucketLine): DumpedBucket {
  const row: Record<string, unknown> = {};
  for (const { column, kind } of BUCKET_FIELDS) {
    const value = line[column] === undefined && column in ADDED_LATER ? ADDED_LATER[column] : line[column];
    if (!hasColumnKind(kind, value)) throw badRequest('malformed bucket line');
    row[column] = value;
  }
  if (line.revision !== undefined && !(Number.isSafeInteger(line.revision) && line.revision >= 0))
    throw badRequest('malformed bucket line');
  return { bucket: bucketFromRow(row as BucketColumns), revision: line.revision ?? 0 };
}

/** What a dump counts: buckets, keys and webhooks. */
export interface DumpCounts {
  buckets: number;
  entries: number;
  webhooks: number;
}

/** Every webhook with its secret, by bucket. */
async function webhooksByBucket(store: Store): Promise<Map<string, RestoredWebhook[]>> {
  const byBucket = new Map<string, RestoredWebhook[]>();
  for (const { holder: _, leaseUntil: __, ...w } of await store.webhooks.all())
    byBucket.set(w.bucket, [...(byBucket.get(w.bucket) ?? []), w]);
  return byBucket;
}

/**
 * Writes every bucket, its live entries (each with its revision and create revision) and its
 * webhooks; each bucket is read from its own consistent snapshot, which also gives the bucket line
 * its revision. `secretsKey` seals the webhooks' signing secrets; without it they are left out.
 */
export async function dumpStore(
  store: Store,
  write: (chunk: string) => Promise<void>,
  now = Date.now(),
  secretsKey?: Buffer,
): Promise<DumpCounts> {
  const hash = createHash('sha256');
  const out = async (chunk: string) => {
    hash.update(chunk);
    await write(chunk);
  };
  await out(
    `${JSON.stringify({ kvb: 'dump', version: DUMP_VERSION, backend: store.flags.backend, dumped_at: new Date(now).toISOString() })}\n`,
  );
  let buckets = 0;
  let entries = 0;
  let webhooks = 0;
  const hooks = await webhooksByBucket(store);
  let after: string | undefined;
  for (;;) {
    const page = await store.buckets.list(after, 100);
    if (page.length === 0) break;
    for (const bucket of page) {
      const snapshot = await store.openSnapshot(bucket.id, '', now);
      // Deleted since the page was read: not in the dump.
      if (!snapshot) continue;
      try {
        await out(bucketLine(bucket, snapshot.revision));
        buckets++;
        for (let batch = await snapshot.read(BATCH); batch.length > 0; batch = await snapshot.read(BATCH)) {
          await out(batch.map(({ key, entry }) => entryLine(key, entry, entry.expiresAt, entry.revision, entry.createRevision)).join(''));
          entries += batch.length;
        }
        const own = hooks.get(bucket.id) ?? [];
        if (own.length > 0) await out(own.map((w) => webhookDumpLine(w, secretsKey)).join(''));
        webhooks += own.length;
      } finally {
        await snapshot.close();
      }
    }
    after = page[page.length - 1]!.id;
  }
  await write(`${JSON.stringify({ kvb: 'end', buckets, count: entries, webhooks, sha256: hash.digest('hex') })}\n`);
  return { buckets, entries, webhooks };
}

type DumpItem = ({ kind: 'bucket' } & DumpedBucket) | { kind: 'entry'; entry: KeyedEntry } | { kind: 'webhook'; webhook: RestoredWebhook };

/** What reading a dump has seen so far: where it is, and the counts the end line must agree with. */
interface DumpProgress {
  hash: Hash;
  /** The line being read (1-based). */
  number: number;
  version: number;
  buckets: number;
  entries: number;
  webhooks: number;
  /** The bucket the lines being read belong to. */
  bucket: string;
  /** A bucket's webhooks follow its entries. */
  bucketWebhooks: number;
  ended: boolean;
}

/** A refusal of the line being read. */
const refusedAt = (p: DumpProgress, why: string) => badRequest(`line ${p.number}: ${why}`);

/** What `read` answers, its refusal said at the line being read. */
function atLine<T>(p: DumpProgress, read: () => T): T {
  try {
    return read();
  } catch (err) {
    throw refusedAt(p, (err as Error).message);
  }
}

/**
 * Reads a dump's lines, checking the header, every line, and the end line's counts and SHA-256;
 * each webhook's sealed secret is opened with `secretsKey` (see webhookFromDump).
 */
async function* readDump(lines: AsyncIterable<string>, secretsKey?: Buffer): AsyncGenerator<DumpItem> {
  const p: DumpProgress = {
    hash: createHash('sha256'),
    number: 0,
    version: 0,
    buckets: 0,
    entries: 0,
    webhooks: 0,
    bucket: '',
    bucketWebhooks: 0,
    ended: false,
  };
  for await (const text of lines) {
    p.number++;
    if (p.ended) {
      if (text === '') continue;
      throw refusedAt(p, 'text after the end line');
    }
    const item = text.startsWith('{"kvb":') ? kvbLine(p, text, secretsKey) : keyLine(p, text);
    if (item) yield item;
    // The end line is not part of what its SHA-256 covers.
    if (!p.ended) p.hash.update(text).update('\n');
  }
  if (!p.ended) throw badRequest('the dump has no end line: is it cut short?');
}

type KvbLine = { kvb?: unknown; version?: unknown; buckets?: unknown; count?: unknown; webhooks?: unknown; sha256?: unknown };

/** One of the dump's own lines (header, bucket, webhook, end): the item it holds, if any. */
function kvbLine(p: DumpProgress, text: string, secretsKey: Buffer | undefined): DumpItem | undefined {
  let line: KvbLine;
  try {
    line = JSON.parse(text) as KvbLine;
  } catch {
    throw refusedAt(p, 'invalid JSON');
  }
  if (p.number === 1) {
    if (line.kvb !== 'dump' || !READABLE_VERSIONS.includes(line.version as number)) {
      throw refusedAt(p, `not a kvb dump (versions ${READABLE_VERSIONS.join(', ')})`);
    }
    p.version = line.version as number;
    return undefined;
  }
  if (line.kvb === 'end') {
    checkEnd(p, line);
    return undefined;
  }
  if (line.kvb === 'bucket') {
    p.buckets++;
    p.bucketWebhooks = 0;
    const item = atLine(p, () => bucketFrom(line as BucketLine));
    p.bucket = item.bucket.id;
    return { kind: 'bucket', ...item };
  }
  if (line.kvb === 'webhook' && p.version >= 4) {
    if (p.buckets === 0) throw refusedAt(p, 'a webhook before any bucket');
    const webhook = atLine(p, () => webhookFromDump(line as WebhookLine, p.bucket, secretsKey));
    p.webhooks++;
    p.bucketWebhooks++;
    return { kind: 'webhook', webhook };
  }
  throw refusedAt(p, 'unknown line');
}

/** The end line: its counts and SHA-256 must be the file's. */
function checkEnd(p: DumpProgress, line: KvbLine): void {
  if (p.version >= 4 && line.webhooks !== p.webhooks)
    throw refusedAt(p, `the end line counts ${String(line.webhooks)} webhooks, the file holds ${p.webhooks}`);
  if (line.buckets !== p.buckets || line.count !== p.entries)
    throw refusedAt(
      p,
      `the end line counts ${String(line.buckets)} buckets and ${String(line.count)} keys, the file holds ${p.buckets} and ${p.entries}`,
    );
  if (line.sha256 !== p.hash.digest('hex')) throw refusedAt(p, 'sha256 does not match the lines before it');
  p.ended = true;
}

/** A key's line, in the export format. */
function keyLine(p: DumpProgress, text: string): DumpItem {
  if (p.number === 1) throw refusedAt(p, 'not a kvb dump');
  if (p.buckets === 0) throw refusedAt(p, 'an entry before any bucket');
  if (p.bucketWebhooks > 0) throw refusedAt(p, "an entry after its bucket's webhooks");
  // A dump holds what a server stored, which --max-value-bytes may have allowed past 16 KiB.
  const parsed = atLine(p, () => parseExportLine(text, true, MAX_VALUE_BYTES_CEILING));
  if (parsed.kind !== 'entry') throw refusedAt(p, 'unexpected line');
  p.entries++;
  const { type, data } = parsed.value;
  const entry = { type, data, expiresAt: parsed.expiresAt, revision: parsed.rev ?? 0, createRevision: parsed.created };
  return { kind: 'entry', entry: { key: parsed.key, entry } };
}

/**
 * Checks a whole dump without writing anything (with `secretsKey`, that it opens every sealed
 * secret); returns its counts, and how many webhooks would come back paused without their secret.
 */
export async function verifyDump(lines: AsyncIterable<string>, secretsKey?: Buffer): Promise<DumpCounts & { withoutSecret: number }> {
  const counts = { buckets: 0, entries: 0, webhooks: 0, withoutSecret: 0 };
  for await (const item of readDump(lines, secretsKey)) {
    if (item.kind === 'bucket') counts.buckets++;
    else if (item.kind === 'entry') counts.entries++;
    else {
      counts.webhooks++;
      if (item.webhook.pausedReason === NO_SECRET_REASON) counts.withoutSecret++;
    }
  }
  return counts;
}

/** Whether the store holds any bucket (a restore refuses a non-empty target unless forced). */
export async function storeIsEmpty(store: Store): Promise<boolean> {
  return (await store.buckets.list(undefined, 1)).length === 0 && (await store.maintenance.countEntries()) === 0;
}

/**
 * Restores a dump that `verifyDump` accepted: each bucket is created with its policy as dumped
 * (a bucket of the same id is replaced when `force`), and its entries applied in one transaction
 * with their dumped revisions, which also sets the bucket's revision: it continues its sequence.
 */
export async function restoreDump(
  store: Store,
  lines: AsyncIterable<string>,
  options: { force: boolean; now?: number; secretsKey?: Buffer },
): Promise<DumpCounts & { skipped: number }> {
  const now = options.now ?? Date.now();
  let buckets = 0;
  let entries = 0;
  let webhooks = 0;
  let skipped = 0;
  let staging: Awaited<ReturnType<Store['beginImport']>> | undefined;
  let restoreRevision = 0;
  let bucketId = '';
  let batch: KeyedEntry[] = [];
  const finishBucket = async () => {
    if (!staging) return;
    if (batch.length > 0) await staging.add(batch);
    batch = [];
    const outcome = await staging.apply({ replace: true, prefix: '', restoreRevision });
    staging = undefined;
    if ('refused' in outcome) throw new Error(`bucket ${bucketId} was deleted while it was being restored`);
  };
  try {
    for await (const item of readDump(lines, options.secretsKey)) {
      if (item.kind === 'webhook') {
        // After the bucket's entries: its revision is the dumped one, which positions refer to.
        await finishBucket();
        if (!(await store.webhooks.restore(item.webhook, Number.MAX_SAFE_INTEGER)))
          throw new Error(`bucket ${bucketId} was deleted while it was being restored`);
        webhooks++;
      } else if (item.kind === 'bucket') {
        await finishBucket();
        if (options.force) {
          await store.buckets.delete(item.bucket.id);
          await store.webhooks.removeBucket(item.bucket.id);
        }
        await store.buckets.create(item.bucket);
        staging = await store.beginImport(item.bucket.id);
        restoreRevision = item.revision;
        bucketId = item.bucket.id;
        buckets++;
      } else if (item.entry.entry.expiresAt !== null && item.entry.entry.expiresAt <= now) {
        skipped++;
      } else {
        batch.push(item.entry);
        entries++;
        if (batch.length >= BATCH) {
          await staging!.add(batch);
          batch = [];
        }
      }
    }
    await finishBucket();
  } finally {
    await staging?.abort();
  }
  return { buckets, entries, webhooks, skipped };
}
