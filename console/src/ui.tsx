import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError } from './api.js';

/** A message for the user from anything thrown. */
export function errorText(err: unknown): string {
  if (err instanceof ApiError) {
    const what = { 401: 'Not authorised', 403: 'Not allowed', 404: 'Not found', 503: 'Unavailable' }[err.status] ?? `Error ${err.status}`;
    return err.detail ? `${what}: ${err.detail}` : what;
  }
  return err instanceof Error ? err.message : String(err);
}

/** Copies text: the Clipboard API where the page is a secure context, else the old way (plain HTTP). */
export async function copyText(text: string): Promise<void> {
  if (navigator.clipboard && window.isSecureContext) return navigator.clipboard.writeText(text);
  const area = document.createElement('textarea');
  area.value = text;
  area.setAttribute('readonly', '');
  area.className = 'offscreen';
  document.body.append(area);
  area.select();
  document.execCommand('copy');
  area.remove();
}

/** Offers bytes as a file download (a blob: URL, allowed by the console's CSP). */
export function download(name: string, bytes: Uint8Array, type: string): void {
  const url = URL.createObjectURL(new Blob([bytes as Uint8Array<ArrayBuffer>], { type }));
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/** A button that copies `text()`, and a status that says so for two seconds. */
export function CopyButton({ label, text }: { label: string; text: () => string }) {
  const [done, setDone] = useState(false);
  useEffect(() => {
    if (!done) return;
    const timer = setTimeout(() => setDone(false), 2000);
    return () => clearTimeout(timer);
  }, [done]);
  return (
    <span class="copy">
      <button type="button" onClick={() => void copyText(text()).then(() => setDone(true))}>
        {label}
      </button>
      <span role="status" class="copied">
        {done ? 'Copied' : ''}
      </span>
    </span>
  );
}

/** A modal confirmation (native <dialog>: focus trapped, Escape cancels, the page behind is inert). */
export function ConfirmDialog(props: {
  title: string;
  children: ComponentChildren;
  confirm: string;
  onConfirm: () => void;
  onCancel: () => void;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    ref.current?.showModal();
  }, []);
  return (
    <dialog ref={ref} aria-labelledby="confirm-title" onCancel={props.onCancel} class="confirm">
      <h2 id="confirm-title">{props.title}</h2>
      <div>{props.children}</div>
      <div class="actions">
        <button type="button" class="danger" onClick={props.onConfirm}>
          {props.confirm}
        </button>
        <button type="button" onClick={props.onCancel} autofocus>
          Cancel
        </button>
      </div>
    </dialog>
  );
}

export function Badge({ children, kind }: { children: ComponentChildren; kind?: string }) {
  return <span class={`badge${kind ? ` badge-${kind}` : ''}`}>{children}</span>;
}

/** An error or notice region that screen readers announce. */
export function Notice({ error, message }: { error?: string; message?: string }) {
  if (error)
    return (
      <p class="notice error" role="alert">
        {error}
      </p>
    );
  if (message)
    return (
      <p class="notice" role="status">
        {message}
      </p>
    );
  return null;
}
