import { describe, expect, it } from 'vitest';
import { startServer } from '../helpers/server.js';

/**
 * SQLite writes run on a writer thread of their own (src/store/sqlite/sqlite-writer-thread.ts).
 * If it fails, a server that could still read but never write again would look healthy to a
 * load balancer: it stops instead, saying why, and exits non-zero. The thread is made to fail by
 * its test hook, KVB_TEST_WRITER_CRASH_AFTER (it throws once it has committed that many batches,
 * before answering the last).
 */
describe('a failed SQLite writer thread stops the server', () => {
  it('answers the writes it held 503 (outcome unknown), logs the failure and exits 1', { timeout: 60_000 }, async () => {
    // Batch 1 creates the bucket; batch 2 is the first key write, committed but never answered.
    const server = await startServer({ env: { KVB_TEST_WRITER_CRASH_AFTER: '2' } });
    try {
      const created = await fetch(`${server.api}/`, { method: 'POST', body: new URLSearchParams({ email: 'crash@test' }) });
      expect(created.status).toBe(201);
      const bucket = await created.text();
      const res = await fetch(`${server.api}/${bucket}/k?ttl=0`, {
        method: 'POST',
        body: 'v',
        headers: { 'content-type': 'text/plain' },
      });
      expect(res.status).toBe(503);
      const body = (await res.json()) as { error: { message: string; detail: string } };
      expect(body.error.message).toBe('service_unavailable');
      expect(body.error.detail).toMatch(/may or may not have been applied/);
      const result = await server.process;
      expect(result.exitCode).toBe(1);
      expect(server.logs()).toMatch(/the SQLite writer thread failed, stopping the server: .*KVB_TEST_WRITER_CRASH_AFTER=2/);
    } finally {
      await server.stop().catch(() => undefined);
    }
  });
});
