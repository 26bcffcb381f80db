import type { FetchLike, FetchResponse } from './http-types.js';

// A browser streams a request body, where fetch could count what is sent, only over HTTP/2, which
// kvb does not serve: there only XMLHttpRequest reports an upload's progress.

/** The part of XMLHttpRequest used here (the CLI is compiled without the DOM's types). */
interface Xhr {
  open(method: string, url: string): void;
  responseType: string;
  setRequestHeader(name: string, value: string): void;
  upload: { onprogress: ((e: { lengthComputable: boolean; loaded: number; total: number }) => void) | null };
  onload: (() => void) | null;
  onerror: (() => void) | null;
  onabort: (() => void) | null;
  status: number;
  response: unknown;
  getResponseHeader(name: string): string | null;
  abort(): void;
  send(body: unknown): void;
}

/** A fetch over XMLHttpRequest telling the fraction of the body sent; undefined where there is none (Node, Deno, Bun). */
export function uploadWithProgress(onProgress: (fraction: number) => void): FetchLike | undefined {
  const Request = (globalThis as { XMLHttpRequest?: new () => Xhr }).XMLHttpRequest;
  if (!Request) return undefined;
  return (url, init) =>
    new Promise<FetchResponse>((resolve, reject) => {
      const xhr = new Request();
      xhr.open(init.method, url);
      xhr.responseType = 'arraybuffer';
      for (const [name, value] of Object.entries(init.headers)) xhr.setRequestHeader(name, value);
      xhr.upload.onprogress = (e) => {
        if (e.lengthComputable && e.total > 0) onProgress(e.loaded / e.total);
      };
      xhr.onload = () => {
        const data = xhr.response as ArrayBuffer;
        resolve({
          status: xhr.status,
          headers: { get: (name) => xhr.getResponseHeader(name) },
          body: null,
          text: async () => new TextDecoder().decode(data),
          arrayBuffer: async () => data,
        });
      };
      // As fetch: a TypeError for a failed connection, the signal's reason for an abort.
      xhr.onerror = () => reject(new TypeError('Failed to fetch'));
      xhr.onabort = () => reject(init.signal?.reason);
      init.signal?.addEventListener('abort', () => xhr.abort(), { once: true });
      xhr.send(init.body);
    });
}
