/** A watch event as a JSONL stream carries it; tests read the fields they check. */
export interface StreamEvent {
  type: string;
  key?: string;
  rev?: number;
  value?: unknown;
  [field: string]: unknown;
}

export interface JsonlReader<T> {
  /** Every complete line received so far, parsed, in order. */
  events: T[];
  /** Resolves when the source ends (or fails: a stopped stream is not an error here). */
  ended: Promise<void>;
}

/** Reads newline-delimited JSON from a byte stream as it arrives. */
export function readJsonl<T = StreamEvent>(source: AsyncIterable<Uint8Array>): JsonlReader<T> {
  const events: T[] = [];
  const ended = (async () => {
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const chunk of source) {
        buffer += decoder.decode(chunk, { stream: true });
        let at: number;
        while ((at = buffer.indexOf('\n')) !== -1) {
          const line = buffer.slice(0, at);
          buffer = buffer.slice(at + 1);
          if (line.trim() !== '') events.push(JSON.parse(line) as T);
        }
      }
    } catch (e) {
      // Stopped or cut: the events read so far are what the test checks. A line that is not JSON is a finding.
      if (e instanceof SyntaxError) throw e;
    }
  })();
  return { events, ended };
}

export interface HttpWatch extends JsonlReader<StreamEvent> {
  stop(): void;
}

/**
 * Opens `GET url` (a `?watch=true&format=jsonl…` URL) and reads its events. Resolves once the
 * answer's headers arrived, which the server sends after it fixed the stream's start revision.
 */
export async function watchStream(url: string, init: RequestInit = {}): Promise<HttpWatch> {
  const controller = new AbortController();
  const res = await fetch(url, { ...init, signal: controller.signal });
  if (!res.ok || !res.body) throw new Error(`watch ${url}: ${res.status} ${await res.text()}`);
  return { ...readJsonl(res.body as unknown as AsyncIterable<Uint8Array>), stop: () => controller.abort() };
}
