import { useEffect, useState } from 'preact/hooks';
import type { Connection } from './api.js';
import { type WebhookAttempt, type WebhookInfo, webhookDeliveries } from './webhook-api.js';
import { lagOf } from './webhook-list.js';
import { Badge, Notice, errorText } from './ui.js';

/** What one webhook's detail offers; each resolves once the server has answered. */
export interface WebhookActions {
  setState: (state: 'active' | 'paused') => Promise<void>;
  test: () => Promise<void>;
  rotate: () => Promise<void>;
  remove: () => void;
}

/** One webhook: its state and position, its actions, and its delivery log (read again after each action). */
export function WebhookDetail(props: { conn: Connection; webhook: WebhookInfo; revision: number; reads: number; actions: WebhookActions }) {
  const { webhook: w, actions } = props;
  const [log, setLog] = useState<WebhookAttempt[] | undefined>();
  const [error, setError] = useState<string | undefined>();
  useEffect(() => {
    let current = true;
    webhookDeliveries(props.conn, w.id).then(
      (attempts) => current && setLog(attempts),
      (err: unknown) => current && setError(errorText(err)),
    );
    return () => {
      current = false;
    };
  }, [w.id, props.reads]);

  return (
    <section class="card webhook-detail" aria-labelledby="webhook-title">
      <h2 id="webhook-title">
        Webhook <code class="key-text">{w.id}</code>
      </h2>
      <dl class="policy">
        <dt>URL</dt>
        <dd class="key-text">{w.url}</dd>
        <dt>State</dt>
        <dd>
          <Badge kind={w.state === 'paused' ? 'paused' : undefined}>{w.state}</Badge> {w.paused_reason}
        </dd>
        <dt>Position</dt>
        <dd>
          revision {w.position}, {lagOf(w, props.revision)} behind the bucket (at {props.revision})
        </dd>
        {w.next_attempt_at && (
          <>
            <dt>Next attempt</dt>
            <dd>{new Date(w.next_attempt_at).toLocaleString()}</dd>
          </>
        )}
      </dl>
      <div class="actions">
        {w.state === 'active' ? (
          <button type="button" onClick={() => void actions.setState('paused')}>
            Pause
          </button>
        ) : (
          <button type="button" onClick={() => void actions.setState('active')}>
            Resume
          </button>
        )}
        <button type="button" onClick={() => void actions.test()}>
          Send test delivery
        </button>
        <button type="button" onClick={() => void actions.rotate()}>
          Rotate secret
        </button>
        <button type="button" class="danger" onClick={actions.remove}>
          Delete webhook
        </button>
      </div>
      <Notice error={error} />
      <DeliveryLog attempts={log} />
    </section>
  );
}

function DeliveryLog({ attempts }: { attempts: WebhookAttempt[] | undefined }) {
  if (!attempts) return <p role="status">Loading the delivery log…</p>;
  if (attempts.length === 0) return <p class="empty">No delivery attempts yet.</p>;
  return (
    <table class="deliveries">
      <caption>Delivery log, newest first</caption>
      <thead>
        <tr>
          <th scope="col">Time</th>
          <th scope="col">Revisions</th>
          <th scope="col">Status</th>
          <th scope="col">Latency</th>
          <th scope="col">Error</th>
        </tr>
      </thead>
      <tbody>
        {attempts.map((a) => (
          <tr key={`${a.attempted_at}-${a.first_revision}`}>
            <td>{new Date(a.attempted_at).toLocaleString()}</td>
            <td>{a.first_revision === a.last_revision ? a.first_revision : `${a.first_revision}–${a.last_revision}`}</td>
            <td>
              <Badge kind={a.ok ? undefined : 'paused'}>{a.status ?? 'no answer'}</Badge>
            </td>
            <td>{a.latency_ms} ms</td>
            <td class="error-excerpt">{a.error ?? ''}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
