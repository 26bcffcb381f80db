// Start-up time of `kvb serve` with the console on and off: spawn → first 200 from /health, median of
// alternating runs. `off` registers no console route at all, so it is the server as it was before.
// Usage: npm run build && npx tsx scripts/startup-time.ts [runs]
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const runs = Number(process.argv[2] ?? 15);
const bin = new URL('../bin/kvb', import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), 'kvb-startup-'));

const freePort = () =>
  new Promise<number>((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });

async function once(consoleSwitch: 'on' | 'off', i: number): Promise<number> {
  const port = await freePort();
  const started = performance.now();
  const child = spawn(
    'node',
    [
      bin,
      'serve',
      '--port',
      String(port),
      '--host',
      '127.0.0.1',
      '--db',
      join(dir, `${consoleSwitch}-${i}.db`),
      '--log-level',
      'warn',
      '--console',
      consoleSwitch,
    ],
    { stdio: 'ignore' },
  );
  try {
    for (;;) {
      try {
        if ((await fetch(`http://127.0.0.1:${port}/health`)).status === 200) return performance.now() - started;
      } catch {
        // not listening yet
      }
      await new Promise((r) => setTimeout(r, 5));
    }
  } finally {
    child.kill();
    await new Promise((r) => child.once('exit', r));
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const times: Record<'on' | 'off', number[]> = { on: [], off: [] };
for (let i = 0; i < runs; i++) for (const s of i % 2 ? (['on', 'off'] as const) : (['off', 'on'] as const)) times[s].push(await once(s, i));
rmSync(dir, { recursive: true, force: true });
console.log(
  `start-up (spawn → first 200 /health), median of ${runs}: console on ${median(times.on).toFixed(0)} ms, console off ${median(times.off).toFixed(0)} ms`,
);
