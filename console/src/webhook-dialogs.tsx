import { useEffect, useRef, useState } from 'preact/hooks';
import { type WebhookKind, WEBHOOK_KINDS } from './webhook-api.js';
import { CopyButton, Notice, errorText } from './ui.js';

/** A new signing secret, shown this once (native <dialog>: focus inside, Escape closes). */
export function SecretDialog(props: { title: string; secret: string; onClose: () => void }) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    ref.current?.showModal();
  }, []);
  return (
    <dialog ref={ref} class="confirm secret" aria-labelledby="secret-title" aria-describedby="secret-warning" onCancel={props.onClose}>
      <h2 id="secret-title">{props.title}</h2>
      <p id="secret-warning" class="notice error">
        Copy the signing secret now: it is not shown again. Your receiver checks each delivery's kvb-signature with it.
      </p>
      <label class="field">
        <span>Signing secret</span>
        <input readOnly value={props.secret} class="key-text" spellcheck={false} />
      </label>
      <div class="actions">
        <CopyButton label="Copy secret" text={() => props.secret} />
        <button type="button" class="primary" onClick={props.onClose}>
          I have copied it
        </button>
      </div>
    </dialog>
  );
}

/** The add form: a URL, an optional prefix, and which changes to send (all by default). */
export function AddWebhook(props: { onAdd: (url: string, prefix: string, kinds: WebhookKind[]) => Promise<void> }) {
  const [url, setUrl] = useState('');
  const [prefix, setPrefix] = useState('');
  const [kinds, setKinds] = useState<Set<WebhookKind>>(new Set(WEBHOOK_KINDS));
  const [error, setError] = useState<string | undefined>();
  const [busy, setBusy] = useState(false);
  const submit = async (event: Event) => {
    event.preventDefault();
    setError(undefined);
    if (!url.trim()) return setError('A URL is required');
    if (kinds.size === 0) return setError('Choose at least one kind of change');
    setBusy(true);
    try {
      await props.onAdd(
        url.trim(),
        prefix,
        WEBHOOK_KINDS.filter((k) => kinds.has(k)),
      );
      setUrl('');
      setPrefix('');
    } catch (err) {
      setError(errorText(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="card" aria-labelledby="add-webhook-title" onSubmit={(e) => void submit(e)} noValidate>
      <h2 id="add-webhook-title">Add a webhook</h2>
      <Notice error={error} />
      <div class="field-row">
        <label class="field">
          <span>URL</span>
          <input
            type="url"
            value={url}
            required
            spellcheck={false}
            autocomplete="off"
            placeholder="https://"
            onInput={(e) => setUrl(e.currentTarget.value)}
          />
        </label>
        <label class="field">
          <span>Key prefix (empty: every key)</span>
          <input value={prefix} spellcheck={false} autocomplete="off" onInput={(e) => setPrefix(e.currentTarget.value)} />
        </label>
      </div>
      <fieldset class="permissions">
        <legend>Changes to send</legend>
        {WEBHOOK_KINDS.map((k) => (
          <label key={k}>
            <input
              type="checkbox"
              checked={kinds.has(k)}
              onChange={(e) => {
                const next = new Set(kinds);
                if (e.currentTarget.checked) next.add(k);
                else next.delete(k);
                setKinds(next);
              }}
            />{' '}
            {k}
          </label>
        ))}
      </fieldset>
      <p class="help">
        Each change under the prefix is POSTed to the URL, signed, in revision order, and retried until it is acknowledged.
      </p>
      <div class="actions">
        <button type="submit" class="primary" disabled={busy}>
          Add webhook
        </button>
      </div>
    </form>
  );
}
