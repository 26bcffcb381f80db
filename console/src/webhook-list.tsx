import type { WebhookInfo } from './webhook-api.js';
import { Badge } from './ui.js';

/** How far behind the bucket a webhook is, in revisions. */
export const lagOf = (w: WebhookInfo, revision: number) => Math.max(0, revision - w.position);

/** The bucket's webhooks, one row each; choosing one opens its detail. */
export function WebhookList(props: {
  webhooks: WebhookInfo[];
  revision: number;
  selected: string | undefined;
  onSelect: (id: string) => void;
}) {
  if (props.webhooks.length === 0) return <p class="empty">No webhooks yet: add one below.</p>;
  return (
    <table class="webhooks">
      <caption class="offscreen">Webhooks of this bucket</caption>
      <thead>
        <tr>
          <th scope="col">URL</th>
          <th scope="col">Prefix</th>
          <th scope="col">Changes</th>
          <th scope="col">State</th>
          <th scope="col">Position</th>
        </tr>
      </thead>
      <tbody>
        {props.webhooks.map((w) => (
          <tr key={w.id} class={w.id === props.selected ? 'current' : undefined}>
            <th scope="row">
              <button type="button" class="link key-text" aria-pressed={w.id === props.selected} onClick={() => props.onSelect(w.id)}>
                {w.url}
              </button>
            </th>
            <td class="key-text">{w.prefix || <span class="help">all keys</span>}</td>
            <td>{w.kinds.join(', ')}</td>
            <td>
              <Badge kind={w.state === 'paused' ? 'paused' : undefined}>{w.state}</Badge>
              {w.paused_reason && <div class="help">{w.paused_reason}</div>}
              {w.attempts > 0 && <div class="help">retrying: {w.attempts} failed</div>}
            </td>
            <td>
              {w.position} <span class="help">({lagOf(w, props.revision)} behind)</span>
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
