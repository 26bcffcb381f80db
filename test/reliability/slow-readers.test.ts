import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportFile } from '../helpers/export-file.js';
import { call, createBucket } from '../helpers/http.js';
import { type RunningServer, startServer } from '../helpers/server.js';

/** Resident memory of a process, in MiB (Linux). */
const rssMiB = (pid: number) => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;
const KEYS = 3000;
const STALL_SECONDS = 3;
const READERS = 12;
const STALLED_READERS = fileURLToPath(new URL('../helpers/stalled-readers.py', import.meta.url));

describe('readers that stop reading', () => {
  let server: RunningServer;
  let bucket: string;
  let path: string;
  beforeAll(async () => {
    server = await startServer({ args: ['--stalled-reader-timeout', String(STALL_SECONDS), '--max-streamed-responses', String(READERS)] });
    bucket = await createBucket(server.api);
    // 3,000 values of 16 KiB: about 48 MiB of values, 64 MiB as base64 in a listing.
    const value = `${JSON.stringify(Buffer.alloc(16 * 1024, 7).toString('base64')).slice(0, 16 * 1024 - 4)}"`;
    const items = Array.from({ length: KEYS }, (_, i) => ({ key: `big/${String(i).padStart(5, '0')}`, type: 'text' as const, value }));
    const res = await call(`${server.api}/${bucket}`, {
      method: 'POST',
      body: exportFile(items),
      headers: { 'content-type': 'application/x-ndjson' },
    });
    expect(res.status, res.text).toBe(200);
    path = `/api/v1/${bucket}/?values=true&format=jsonl&limit=${KEYS}`;
  }, 60_000);
  afterAll(async () => {
    await server.stop();
  });

  it(`${READERS} stalled readers pin a bounded amount of memory, the next streamed listing gets 503, and all are cut after the stall timeout`, {
    timeout: 120_000,
  }, async () => {
    const pid = server.process.pid!;
    // Warm up: one full listing read normally.
    const full = await call(`${server.url}${path}`);
    expect(full.status).toBe(200);
    expect(full.text.split('\n').filter(Boolean).length).toBe(KEYS);
    const before = rssMiB(pid);
    const { hostname, port } = new URL(server.url);
    // Python, because it can give its sockets a tiny receive buffer: the listing then backs up
    // into the server as it would behind a real slow client, instead of into loopback buffers.
    const readers = execa('python3', [STALLED_READERS, hostname, port, path, String(READERS), String(STALL_SECONDS + 6), '15'], {
      reject: false,
    });
    let stalled!: () => void;
    const started = new Promise<void>((resolve) => (stalled = resolve));
    readers.stdout?.on('data', (chunk: Buffer) => {
      if (chunk.toString().includes('stalled')) stalled();
    });
    await started;
    // The total is bounded: once the stalled readers hold every slot, one streamed listing more
    // (here two pages of keys) is turned away for now; a one-page listing and /health still work.
    const twoPages = `${server.api}/${bucket}/?limit=${KEYS}`;
    let turned = await call(twoPages);
    await expect.poll(async () => (turned = await call(twoPages)).status, { timeout: 10_000, interval: 200 }).toBe(503);
    expect(turned.json()).toEqual({ error: { code: 503, message: 'service_unavailable', detail: turned.headers.get('kvb-error-detail') } });
    expect(turned.headers.get('retry-after')).toBe('1');
    expect((await call(`${server.api}/${bucket}/?limit=3`)).status).toBe(200);
    expect((await call(`${server.url}/health`)).status).toBe(200);
    const during = rssMiB(pid);
    // The whole listing, rendered, is about 48 MiB per reader: 12 readers held whole would be
    // over 550 MiB. Each holds at most a page or two of about 2 MiB (plus socket buffers).
    console.log(`slow readers: RSS ${before.toFixed(0)} MiB before, ${during.toFixed(0)} MiB with ${READERS} stalled readers`);
    expect(during - before, `RSS ${before.toFixed(0)} -> ${during.toFixed(0)} MiB`).toBeLessThan(120);

    // After the stall timeout the server has cut every one of them, well short of the listing.
    const result = JSON.parse((await readers).stdout.trim().split('\n').at(-1)!) as Array<{ bytes: number; closed: boolean }>;
    expect(result).toHaveLength(READERS);
    for (const { bytes, closed } of result) {
      expect(closed, JSON.stringify(result)).toBe(true);
      expect(bytes).toBeLessThan(full.body.length / 2);
    }
    // Their slots are free again.
    expect((await call(twoPages)).status).toBe(200);
  });
});
