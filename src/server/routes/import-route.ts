import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { KvbError, badRequest } from '../../errors.js';
import type { ImportStaging, KeyedEntry } from '../../store/store.js';
import { type ExportLine, MAX_EXPORT_LINE_BYTES, parseExportLine } from '../../values/export-format.js';
import { mediaType } from '../../values/infer-value.js';
import { checkKey } from '../../values/keys.js';
import { actorOf, authorize, openBucket } from '../access-control.js';
import { type NdjsonLine, ndjsonLines } from '../ndjson-lines.js';
import type { CachedBucket } from '../bucket-cache.js';
import type { Principal } from '../../auth/access.js';
import type { ServerContext } from '../server-context.js';
import { bucketIdOf, expiryFor, queryOf, singleParam } from '../request-input.js';
import { effectivePrefix } from './effective-prefix.js';
import { ImportedWebhooks } from './import-webhooks.js';

export const IMPORT_MEDIA_TYPES = ['application/x-ndjson', 'application/jsonl', 'application/x-jsonlines'];
/** Entries handed to the staging area at a time. */
const STAGE_BATCH = 1000;
/** Imports staging at once on this instance (each holds a pooled connection on PostgreSQL). */
export const MAX_CONCURRENT_IMPORTS = 2;

export const isImportRequest = (request: FastifyRequest) => IMPORT_MEDIA_TYPES.includes(mediaType(request.headers['content-type']));

/** A 400 or 403 naming the line it is about, in Kvb-Error-Detail. */
function atLine(number: number, err: unknown): unknown {
  if (err instanceof KvbError && !err.detail.startsWith('line ')) return new KvbError(err.kind, `line ${number}: ${err.detail}`);
  return err;
}

/** Who imports into which bucket, under which prefix, merging or replacing it. */
interface ImportScope {
  bucket: CachedBucket;
  principal: Principal;
  prefix: string;
  mode: 'merge' | 'replace';
}

/**
 * `POST /api/v1/{bucket}` with an NDJSON export as the body: streamed into a staging area, checked
 * line by line, and only once the end line's count and SHA-256 match applied in one transaction.
 * Any failure leaves the bucket untouched.
 */
export async function importRoute(ctx: ServerContext, request: FastifyRequest, reply: FastifyReply, body: Readable): Promise<FastifyReply> {
  const { store, config, transfers, clock } = ctx;
  const scope = await openImport(ctx, request);
  const { bucket, principal, prefix, mode } = scope;
  // A refusal mid-body closes the connection instead of reading the rest of a large upload.
  const refuse = (err: unknown) => {
    reply.header('connection', 'close');
    return err;
  };
  if (transfers.imports >= MAX_CONCURRENT_IMPORTS) {
    reply.header('retry-after', '5');
    throw refuse(new KvbError('service_unavailable', `too many imports at once (at most ${MAX_CONCURRENT_IMPORTS})`));
  }
  transfers.imports++;
  let staging: ImportStaging | undefined;
  const webhooks = new ImportedWebhooks(ctx, bucket, principal, prefix);
  try {
    staging = await store.beginImport(bucket.record.id);
    const lines = new ImportLines(scope, staging, webhooks, config.maxValueBytes, clock());
    for await (const line of ndjsonLines(body, Math.max(MAX_EXPORT_LINE_BYTES, 8 * config.maxValueBytes), config.maxImportBytes)) {
      try {
        await lines.take(line);
      } catch (err) {
        throw refuse(atLine(line.number, err));
      }
    }
    await lines.finish();
    await webhooks.stage();
    // An import is one revision of the bucket: every imported key carries it.
    const outcome = await staging.apply({ replace: mode === 'replace', prefix, actor: actorOf(principal, request) });
    staging = undefined;
    if ('refused' in outcome) throw new KvbError('not_found', 'no such bucket');
    const added = webhooks.count > 0 ? { webhooks: await webhooks.settle(outcome.revision) } : {};
    return reply
      .code(200)
      .header('kvb-revision', String(outcome.revision))
      .send({ imported: lines.imported, skipped: lines.skipped, rev: outcome.revision, ...added });
  } catch (err) {
    await webhooks.undo();
    throw refuse(err);
  } finally {
    transfers.imports--;
    await staging?.abort();
  }
}

/** The import's mode and prefix, and its bucket opened and the caller authorized, before a byte of the body is read. */
async function openImport({ buckets }: ServerContext, request: FastifyRequest): Promise<ImportScope> {
  const query = queryOf(request);
  const mode = singleParam(query, 'mode') ?? 'merge';
  if (mode !== 'merge' && mode !== 'replace') throw badRequest('mode must be merge or replace');
  const requestedPrefix = singleParam(query, 'prefix') ?? '';
  if (requestedPrefix !== '') checkKey(requestedPrefix, 'prefix');
  const { bucket, principal } = await openBucket(buckets, bucketIdOf(request), request);
  authorize(bucket, principal, 'write');
  const prefix = effectivePrefix(principal, requestedPrefix);
  if (mode === 'replace') authorize(bucket, principal, 'delete', prefix || undefined);
  return { bucket, principal, prefix, mode };
}

/** An import's lines as they are read: each checked, entries staged in batches, counted and hashed for the end line. */
export class ImportLines {
  imported = 0;
  skipped = 0;
  private entries = 0;
  private batch: KeyedEntry[] = [];
  private end: { count: number; sha256: string; line: number } | undefined;
  private readonly hash = createHash('sha256');

  constructor(
    private readonly scope: ImportScope,
    private readonly staging: ImportStaging,
    private readonly webhooks: ImportedWebhooks,
    private readonly maxValueBytes: number,
    private readonly now: number,
  ) {}

  /** One line; throws the 400 or 403 it earns (the caller names the line). */
  async take(line: NdjsonLine): Promise<void> {
    if (this.end) {
      if (line.bytes.length === 0 && !line.terminated) return;
      throw badRequest('text after the end line');
    }
    const text = line.bytes.toString('utf8');
    if (!line.bytes.equals(Buffer.from(text, 'utf8'))) throw badRequest('not valid UTF-8');
    const parsed = parseExportLine(text, false, this.maxValueBytes);
    if (line.number === 1) {
      if (parsed.kind !== 'header') throw badRequest('the first line must be the export header {"kvb":"export",…}');
    } else if (parsed.kind === 'header') {
      throw badRequest('a second header line');
    } else if (parsed.kind === 'end') {
      if (!line.terminated) throw badRequest('the end line is cut short');
      this.end = { ...parsed, line: line.number };
      return;
    } else if (parsed.kind === 'webhook') {
      this.webhooks.take(parsed);
    } else {
      await this.entry(parsed);
    }
    if (!line.terminated) throw badRequest('the file ends without an end line (cut short?)');
    this.hash.update(line.bytes).update('\n');
  }

  private async entry(parsed: Extract<ExportLine, { kind: 'entry' }>): Promise<void> {
    const { bucket, principal, prefix, mode } = this.scope;
    const { now } = this;
    this.entries++;
    if (!parsed.key.startsWith(prefix)) {
      if (principal.kind === 'token' && !parsed.key.startsWith(principal.prefix)) {
        throw new KvbError(
          'forbidden',
          `key ${JSON.stringify(parsed.key)} is outside the token's prefix ${JSON.stringify(principal.prefix)}`,
        );
      }
      throw badRequest(`key is outside the prefix being ${mode === 'replace' ? 'replaced' : 'imported'}`);
    }
    authorize(bucket, principal, 'write', parsed.key);
    // A line that states no expiry gets the bucket's default TTL, as every other write does.
    const expiresAt = parsed.ownExpiry ? parsed.expiresAt : expiryFor(bucket.record.defaultTtl, now);
    if (expiresAt !== null && expiresAt <= now) {
      this.skipped++;
      return;
    }
    this.imported++;
    this.batch.push({ key: parsed.key, entry: { type: parsed.value.type, data: parsed.value.data, expiresAt } });
    if (this.batch.length >= STAGE_BATCH) {
      await this.staging.add(this.batch);
      this.batch = [];
    }
  }

  /** After the last line: the end line's count and hash checked, the last batch staged. */
  async finish(): Promise<void> {
    const { end, entries } = this;
    if (!end) throw badRequest('the import has no end line {"kvb":"end",…}: is it cut short?');
    if (end.count !== entries) throw badRequest(`line ${end.line}: the end line counts ${end.count} keys, the file holds ${entries}`);
    if (end.sha256 !== this.hash.digest('hex')) throw badRequest(`line ${end.line}: sha256 does not match the lines before it`);
    if (this.batch.length > 0) await this.staging.add(this.batch);
  }
}
