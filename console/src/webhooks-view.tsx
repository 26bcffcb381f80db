import { useEffect, useRef, useState } from 'preact/hooks';
import type { Connection } from './api.js';
import {
  type WebhookInfo,
  addWebhook,
  deleteWebhook,
  listWebhooks,
  rotateWebhookSecret,
  setWebhookState,
  testWebhook,
} from './webhook-api.js';
import { WebhookDetail } from './webhook-detail.js';
import { AddWebhook, SecretDialog } from './webhook-dialogs.js';
import { WebhookList } from './webhook-list.js';
import { ConfirmDialog, Notice, errorText } from './ui.js';

/** The Webhooks screen (secret key): the bucket's webhooks, one opened with its actions and delivery log, and the add form. */
export function WebhooksView({ conn }: { conn: Connection }) {
  const [hooks, setHooks] = useState<{ webhooks: WebhookInfo[]; revision: number } | undefined>();
  const [selected, setSelected] = useState<string | undefined>();
  const [secret, setSecret] = useState<{ title: string; secret: string } | undefined>();
  const [confirmDelete, setConfirmDelete] = useState<WebhookInfo | undefined>();
  const [notice, setNotice] = useState<{ error?: string; message?: string }>({});
  // Each read of the list bumps it: the open webhook's delivery log is read again with it.
  const [reads, setReads] = useState(0);
  // Only the latest read is shown: an older answer that arrives late must not undo a change.
  const latest = useRef(0);
  const refresh = async () => {
    const n = ++latest.current;
    try {
      const read = await listWebhooks(conn);
      if (n !== latest.current) return;
      setHooks(read);
      setReads((r) => r + 1);
    } catch (err) {
      if (n === latest.current) setNotice({ error: errorText(err) });
    }
  };
  useEffect(() => {
    void refresh();
  }, [conn]);

  /** Runs an action, says what it did, and reads the list again. */
  const act = async (what: string, action: () => Promise<unknown>) => {
    try {
      await action();
      setNotice({ message: what });
    } catch (err) {
      setNotice({ error: errorText(err) });
    }
    await refresh();
  };
  const open = hooks?.webhooks.find((w) => w.id === selected);

  return (
    <section class="webhooks-view" aria-label="Webhooks">
      <Notice {...notice} />
      <section class="card" aria-labelledby="webhooks-title">
        <div class="inline">
          <h2 id="webhooks-title">Webhooks of this bucket</h2>
          <button type="button" onClick={() => void refresh()}>
            Refresh webhooks
          </button>
        </div>
        {hooks ? (
          <WebhookList webhooks={hooks.webhooks} revision={hooks.revision} selected={selected} onSelect={setSelected} />
        ) : (
          <p role="status">Loading…</p>
        )}
      </section>
      {open && hooks && (
        <WebhookDetail
          conn={conn}
          webhook={open}
          revision={hooks.revision}
          reads={reads}
          actions={{
            setState: (state) =>
              act(state === 'paused' ? 'The webhook is paused' : 'The webhook is resumed', () => setWebhookState(conn, open.id, state)),
            test: () =>
              act('A test delivery was sent', async () => {
                const attempt = await testWebhook(conn, open.id);
                if (!attempt.ok) throw new Error(`The test delivery failed: ${attempt.error ?? `HTTP ${attempt.status}`}`);
              }),
            rotate: () =>
              act('The signing secret is rotated', async () =>
                setSecret({ title: 'New signing secret', secret: await rotateWebhookSecret(conn, open.id) }),
              ),
            remove: () => setConfirmDelete(open),
          }}
        />
      )}
      <AddWebhook
        onAdd={async (url, prefix, kinds) => {
          const made = await addWebhook(conn, url, prefix, kinds);
          setSelected(made.id);
          setSecret({ title: 'Webhook added', secret: made.secret });
          setNotice({ message: `Webhook ${made.id} added` });
          await refresh();
        }}
      />
      {secret && <SecretDialog {...secret} onClose={() => setSecret(undefined)} />}
      {confirmDelete && (
        <ConfirmDialog
          title="Delete this webhook?"
          confirm="Delete webhook"
          onCancel={() => setConfirmDelete(undefined)}
          onConfirm={() => {
            const id = confirmDelete.id;
            setConfirmDelete(undefined);
            setSelected(undefined);
            void act(`Webhook ${id} deleted`, () => deleteWebhook(conn, id));
          }}
        >
          <p>
            Deliveries to <code class="key-text">{confirmDelete.url}</code> stop, and its delivery log is deleted. This cannot be undone.
          </p>
        </ConfirmDialog>
      )}
    </section>
  );
}
