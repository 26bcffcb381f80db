import { revisionOf } from './client-errors.js';
import type {
  BodyStream,
  CallOptions,
  HistoryLine,
  HistoryPage,
  ImportResult,
  ListOptions,
  ListPage,
  RequestBody,
  RollbackResult,
} from './http-types.js';
import { bucketPath, callOf, type HttpTransport, jsonOf, keyPath } from './http-transport.js';
import { quotedKey } from './key-requests.js';

// The routes that read or write many keys at once: listing pages, a key's history, rollback,
// export, import and the watch stream.

/** Listing, history, rollback, export/import and watch. */
export class ListingRequests {
  readonly #http: HttpTransport;

  constructor(http: HttpTransport) {
    this.#http = http;
  }

  /**
   * One page of a key's recorded changes, newest first, or (key undefined) of the bucket's change
   * log in revision order, and the cursor of the next page.
   */
  async history(
    bucket: string,
    key: string | undefined,
    page: HistoryPage = {},
    options: CallOptions = {},
  ): Promise<{ lines: HistoryLine[]; texts: string[]; nextCursor: string | undefined; floor: number | undefined }> {
    const answer = await this.#http.send({
      ...callOf(options),
      method: 'GET',
      path: key === undefined ? `${bucketPath(bucket)}/` : keyPath(bucket, key),
      subject: key === undefined ? `change log of bucket ${bucket}` : `history of key ${quotedKey(key)} in bucket ${bucket}`,
      query: {
        history: true,
        values: page.values,
        limit: page.limit,
        cursor: page.cursor,
        actor: page.actor,
        prefix: page.prefix || undefined,
        since: page.since,
        until: page.until,
      },
      idempotent: true,
    });
    const texts = new TextDecoder().decode(answer.data).split('\n').filter(Boolean);
    return {
      lines: texts.map((line) => JSON.parse(line) as HistoryLine),
      // Each line as the server wrote it: its value's numbers exact (an int64 is a JSON number there).
      texts,
      nextCursor: answer.headers.get('kvb-next-cursor') ?? undefined,
      floor: revisionOf(answer.headers.get('kvb-history-floor')),
    };
  }

  /** Rolls the bucket (or a prefix) back to its state at `revision` as one new revision; `dryRun` only tells what would change. Never retried. */
  async rollback(
    bucket: string,
    revision: number,
    rollback: { prefix?: string | undefined; dryRun?: boolean | undefined } = {},
    options: CallOptions = {},
  ): Promise<RollbackResult> {
    const answer = await this.#http.send({
      ...callOf(options),
      method: 'POST',
      path: bucketPath(bucket),
      subject: `rollback of bucket ${bucket}`,
      query: { rollback: revision, prefix: rollback.prefix || undefined, dry_run: rollback.dryRun || undefined },
      ...(rollback.dryRun && { idempotent: true }),
    });
    return jsonOf<RollbackResult>(answer);
  }

  /** One page of keys and the cursor that continues after it (see `Kvb-Next-Cursor`); the body streams. */
  async listPage(bucket: string, list: ListOptions, options: CallOptions = {}): Promise<ListPage> {
    const answer = await this.#http.send({
      ...callOf(options),
      method: 'GET',
      path: `${bucketPath(bucket)}/`,
      subject: `bucket ${bucket}`,
      query: {
        prefix: list.prefix || undefined,
        limit: list.limit,
        skip: list.skip,
        reverse: list.reverse,
        values: list.values,
        meta: list.meta,
        format: list.format,
        cursor: list.cursor,
        rev: list.revision,
        delimiter: list.delimiter,
      },
      idempotent: true,
      stream: true,
    });
    return {
      body: answer.body,
      nextCursor: answer.headers.get('kvb-next-cursor') ?? undefined,
      revision: revisionOf(answer.headers.get('kvb-revision')),
    };
  }

  /** Exports the bucket (or a prefix) as the NDJSON export format, streamed. */
  async exportBucket(bucket: string, prefix?: string, options: CallOptions = {}): Promise<BodyStream> {
    const answer = await this.#http.send({
      ...callOf(options),
      method: 'GET',
      path: `${bucketPath(bucket)}/`,
      subject: `export of bucket ${bucket}`,
      query: { export: true, prefix: prefix || undefined },
      idempotent: true,
      stream: true,
    });
    return answer.body;
  }

  /** Imports an export (streamed from `body`); all or nothing on the server. Never retried (the body is consumed). */
  async importBucket(
    bucket: string,
    body: RequestBody,
    options: CallOptions & {
      mode?: 'merge' | 'replace' | undefined;
      prefix?: string | undefined;
      onUploadProgress?: ((fraction: number) => void) | undefined;
    } = {},
  ): Promise<ImportResult> {
    return jsonOf(
      await this.#http.send({
        ...callOf(options),
        onUploadProgress: options.onUploadProgress,
        method: 'POST',
        path: bucketPath(bucket),
        subject: `import into bucket ${bucket}`,
        query: { mode: options.mode, prefix: options.prefix || undefined },
        headers: { 'content-type': 'application/x-ndjson' },
        body,
      }),
    );
  }

  /** Opens a watch stream (JSONL, one event per line), streamed as it arrives. Not retried here: the caller resumes. */
  async watch(
    bucket: string,
    watch: { prefix?: string | undefined; since?: number | undefined; values?: boolean | undefined },
    options: CallOptions = {},
  ): Promise<BodyStream> {
    const answer = await this.#http.send({
      ...callOf(options),
      method: 'GET',
      path: `${bucketPath(bucket)}/`,
      subject: `bucket ${bucket}`,
      query: { watch: true, prefix: watch.prefix || undefined, since: watch.since, values: watch.values, format: 'jsonl' },
      stream: true,
    });
    return answer.body;
  }
}
