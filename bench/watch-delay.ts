/**
 * Write-to-event delay of the watch feed: a writer PUTs keys one after another (with a pause, so
 * the feed is idle in between, as in real use) and a watcher measures, per key, the time from
 * sending the PUT to receiving its event. On PostgreSQL the writer talks to instance A and the
 * watcher to instance B, so the delay includes the cross-instance poll.
 */
import { request } from 'node:http';
import { httpRequest } from './processes.js';

export interface WatchDelayResult {
  where: string;
  writes: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;

export async function measureWatchDelay(writerUrl: string, watcherUrl: string, writes: number, where: string): Promise<WatchDelayResult> {
  const bucket = (
    await httpRequest(`${writerUrl}/api/v1/`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'email=bench@example.com',
    })
  ).body;
  const sentAt = new Map<string, number>();
  const delays: number[] = [];
  let ready!: () => void;
  const synced = new Promise<void>((resolve) => (ready = resolve));
  let done!: () => void;
  const all = new Promise<void>((resolve) => (done = resolve));
  const req = request(`${watcherUrl}/api/v1/${bucket}/?watch=true&format=jsonl`, { agent: false }, (res) => {
    let buffer = '';
    res.setEncoding('utf8');
    res.on('data', (chunk: string) => {
      const now = performance.now();
      buffer += chunk;
      let at: number;
      while ((at = buffer.indexOf('\n')) !== -1) {
        const event = JSON.parse(buffer.slice(0, at)) as { type: string; key?: string };
        buffer = buffer.slice(at + 1);
        if (event.type === 'sync') ready();
        const sent = event.key === undefined ? undefined : sentAt.get(event.key);
        if (event.type === 'set' && sent !== undefined) {
          delays.push(now - sent);
          if (delays.length === writes) done();
        }
      }
    });
  });
  req.end();
  try {
    await synced;
    for (let i = 0; i < writes; i++) {
      const key = `k${i}`;
      sentAt.set(key, performance.now());
      await httpRequest(`${writerUrl}/api/v1/${bucket}/${key}`, { method: 'PUT', headers: { 'content-type': 'text/plain' }, body: 'v' });
      await new Promise((resolve) => setTimeout(resolve, 5 + Math.random() * 15));
    }
    await all;
  } finally {
    req.destroy();
  }
  delays.sort((x, y) => x - y);
  const round = (ms: number) => Math.round(ms * 10) / 10;
  return { where, writes, p50Ms: round(percentile(delays, 50)), p99Ms: round(percentile(delays, 99)), maxMs: round(delays.at(-1)!) };
}
