/**
 * First contacts a second: how fast a fresh `kvb serve` answers the first use of fresh, valid keys
 * arriving all at once, as after a restart or a deploy. Each of N buckets has a secret, a read and a write key; every
 * client writes one key with its bucket's write key (the last of the three an old server tried). A client
 * refused with 429 waits its Retry-After and tries again, as a well-behaved client does, so the
 * figure is the rate at which first contacts are actually served.
 *
 *   npx tsx bench/first-contact.ts [--buckets 48] [--bin path/to/bin/kvb] [--runs 3]
 *
 * `--bin` runs another build (e.g. one of main before this change, built in a scratch directory).
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const arg = (name: string, fallback: string) => {
  const at = process.argv.indexOf(`--${name}`);
  return at === -1 ? fallback : process.argv[at + 1]!;
};
const BUCKETS = Number(arg('buckets', '48'));
const RUNS = Number(arg('runs', '3'));
const BIN = arg('bin', fileURLToPath(new URL('../bin/kvb', import.meta.url)));

interface Reply {
  status: number;
  retryAfter: number;
  body: string;
}

function send(url: string, method: string, headers: Record<string, string>, body?: string): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method, headers, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode!, retryAfter: Number(res.headers['retry-after'] ?? 1), body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function startServer(): Promise<{ url: string; stop: () => Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), 'kvb-bench-fc-'));
  const child = spawn('node', [BIN, 'serve', '--port', '0', '--host', '127.0.0.1', '--db', join(dir, 'kvb.db'), '--log-format', 'json'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    const seen = (chunk: Buffer) => {
      out += chunk.toString();
      const match = /listening on (http:\/\/[^\s"]+)/.exec(out);
      if (match) resolve(match[1]!);
    };
    child.stdout.on('data', seen);
    child.stderr.on('data', seen);
    child.once('exit', () => reject(new Error(`kvb serve exited:\n${out}`)));
  });
  return {
    url,
    stop: async () => {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function oneRun(): Promise<{ perSecond: number; refusals: number; seconds: number }> {
  const server = await startServer();
  try {
    const api = `${server.url}/api/v1`;
    const buckets: Array<{ id: string; write: string }> = [];
    // Created a few at a time: creation hashes too, and is not what is measured.
    for (let i = 0; i < BUCKETS; i += 8) {
      const batch = Array.from({ length: Math.min(8, BUCKETS - i) }, async () => {
        const keys = {
          secret_key: randomBytes(9).toString('hex'),
          read_key: randomBytes(9).toString('hex'),
          write_key: randomBytes(9).toString('hex'),
        };
        const form = new URLSearchParams({ email: 'bench@example.com', ...keys }).toString();
        const created = await send(`${api}/`, 'POST', { 'content-type': 'application/x-www-form-urlencoded' }, form);
        if (created.status !== 201) throw new Error(`create: ${created.status} ${created.body}`);
        buckets.push({ id: created.body, write: keys.write_key });
      });
      await Promise.all(batch);
    }
    let refusals = 0;
    const started = performance.now();
    await Promise.all(
      buckets.map(async ({ id, write }) => {
        for (;;) {
          const reply = await send(`${api}/${id}/k`, 'PUT', { authorization: `Bearer ${write}`, 'content-type': 'text/plain' }, 'v');
          if (reply.status === 200) return;
          if (reply.status !== 429) throw new Error(`first contact: ${reply.status} ${reply.body}`);
          refusals++;
          await new Promise((resolve) => setTimeout(resolve, reply.retryAfter * 1000));
        }
      }),
    );
    const seconds = (performance.now() - started) / 1000;
    return { perSecond: BUCKETS / seconds, refusals, seconds };
  } finally {
    await server.stop();
  }
}

const results = [];
for (let run = 0; run < RUNS; run++) results.push(await oneRun());
const median = [...results].sort((a, b) => a.perSecond - b.perSecond)[Math.floor(results.length / 2)]!;
console.log(
  `first contacts: ${BUCKETS} at once, write key of 3-key buckets, ${BIN}\n` +
    results
      .map((r, i) => `  run ${i + 1}: ${r.perSecond.toFixed(1)}/s (${r.seconds.toFixed(2)} s, ${r.refusals} answers 429 before success)`)
      .join('\n') +
    `\n  median: ${median.perSecond.toFixed(1)} first contacts/s`,
);
