import type { Principal } from '../../auth/access.js';
import { badRequest } from '../../errors.js';
import { newWebhookId, newWebhookSecret } from '../../store/webhook-ids.js';
import type { RestoredWebhook, Webhook } from '../../store/webhook-types.js';
import type { ExportedWebhook } from '../../values/export-format.js';
import type { CachedBucket } from '../bucket-cache.js';
import type { ServerContext } from '../server-context.js';
import { authorizeWebhooks, checkedWebhook, webhookLimitReached } from '../webhooks/webhook-rules.js';
import { webhookView } from './webhook-routes.js';

/** An imported webhook's reason while its bucket does not hold the import yet (it delivers nothing meanwhile). */
const IMPORTING = 'being imported';

const sameWebhook = (a: Pick<Webhook, 'url' | 'prefix' | 'kinds'>, b: Pick<Webhook, 'url' | 'prefix' | 'kinds'>) =>
  a.url === b.url && a.prefix === b.prefix && [...a.kinds].sort().join() === [...b.kinds].sort().join();

/**
 * The webhook lines of an import (a secret-key holder's export of a whole bucket): each checked as
 * the add route checks one, added before the keys are applied (paused, so a refusal at the limit
 * changes nothing and no delivery starts early), then placed at the import's revision with a new
 * secret, which the import's answer shows this once. One the bucket has already (same URL, prefix
 * and kinds) is kept, not added twice, so importing the same export twice adds nothing.
 */
export class ImportedWebhooks {
  private readonly lines: Array<ExportedWebhook & { kinds: Webhook['kinds'] }> = [];
  private readonly added: RestoredWebhook[] = [];

  constructor(
    private readonly ctx: ServerContext,
    private readonly bucket: CachedBucket,
    private readonly principal: Principal,
    private readonly prefix: string,
  ) {}

  get count(): number {
    return this.lines.length;
  }

  /** One webhook line: refused (403, 400, 409) before any more of the body is read. */
  take(line: ExportedWebhook): void {
    authorizeWebhooks(this.bucket, this.principal);
    if (this.prefix !== '') throw badRequest('webhooks are imported with a whole bucket, not under a prefix');
    const kinds = checkedWebhook(line.url, line.kinds.length === 0 ? undefined : line.kinds, this.ctx.config.webhookAllowPrivate);
    if (this.lines.length >= this.ctx.config.maxWebhooksPerBucket) throw webhookLimitReached(this.ctx.config.maxWebhooksPerBucket);
    this.lines.push({ ...line, kinds });
  }

  /** Adds the new ones, paused; a bucket past its limit refuses the whole import (409) and keeps none. */
  async stage(): Promise<void> {
    if (this.lines.length === 0) return;
    const { store, config, clock } = this.ctx;
    const bucket = this.bucket.record.id;
    const existing = await store.webhooks.list(bucket);
    const fresh = this.lines.filter(
      (line, i) => !existing.some((w) => sameWebhook(w, line)) && this.lines.findIndex((l) => sameWebhook(l, line)) === i,
    );
    if (existing.length + fresh.length > config.maxWebhooksPerBucket) throw webhookLimitReached(config.maxWebhooksPerBucket);
    const now = clock();
    for (const [i, line] of fresh.entries()) {
      const w: RestoredWebhook = {
        id: newWebhookId(),
        bucket,
        url: line.url,
        prefix: line.prefix,
        kinds: line.kinds,
        secret: newWebhookSecret(),
        state: 'paused',
        pausedReason: IMPORTING,
        position: 0,
        failingSince: null,
        attempts: 0,
        nextAttemptAt: 0,
        // A millisecond apart: the bucket lists them in the file's order (listings order by creation).
        createdAt: now + i,
      };
      // The limit is checked again by the insert: a webhook added meanwhile cannot take the bucket past it.
      if (!(await store.webhooks.restore(w, config.maxWebhooksPerBucket))) {
        await this.undo();
        throw webhookLimitReached(config.maxWebhooksPerBucket);
      }
      this.added.push(w);
    }
  }

  /** Once the keys are applied at `revision`: each delivers the changes after it, in its exported state. */
  async settle(revision: number) {
    const shown = [];
    for (const w of this.added) {
      const line = this.lines.find((l) => sameWebhook(l, w))!;
      await this.ctx.store.webhooks.place(
        w.bucket,
        w.id,
        revision,
        line.state,
        line.state === 'paused' ? (line.paused_reason ?? 'paused by request') : null,
      );
      const placed = await this.ctx.store.webhooks.get(w.bucket, w.id);
      if (placed) shown.push({ ...webhookView(placed), secret: w.secret });
    }
    this.added.length = 0;
    return shown;
  }

  /** Takes back what stage added (the import was refused after it). */
  async undo(): Promise<void> {
    for (const w of this.added.splice(0)) await this.ctx.store.webhooks.remove(w.bucket, w.id);
  }
}
