/**
 * `npm run bench:client`: what kvb/client costs over a bare fetch, and what it weighs.
 * - Overhead: N sequential GETs of one key against one kvb server, through `kv.get()` (URL building,
 *   typed decoding, the error and retry machinery) and through a bare `fetch` + `arrayBuffer()`,
 *   interleaved in rounds so both see the same machine load. Reports µs per call and the difference.
 * - Size: src/client/index.ts bundled for the browser with esbuild --bundle --minify, raw and gzipped.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { build } from 'esbuild';
import { connect, createBucket } from '../src/client/index.js';
import { startKvb } from './services.js';

const CALLS = Number(process.env.CALLS ?? 2000);
const ROUNDS = 20;

async function bundleSize(): Promise<{ raw: number; gzipped: number }> {
  const result = await build({
    entryPoints: [new URL('../src/client/index.ts', import.meta.url).pathname],
    bundle: true,
    minify: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    write: false,
  });
  const code = result.outputFiles[0]!.contents;
  return { raw: code.length, gzipped: gzipSync(code, { level: 9 }).length };
}

const tmp = mkdtempSync(join(tmpdir(), 'kvb-client-bench-'));
const server = await startKvb('kvb', tmp, join(tmp, 'kvb.db'));
try {
  const bucket = await createBucket({ url: server.url }, { email: 'bench@example.com', secret_key: 'S' });
  const kv = connect({ url: server.url, bucket, token: 'S' });
  await kv.set('greeting', 'hello');
  const url = `${server.url}/api/v1/${bucket}/greeting`;
  const bare = async () => {
    const response = await fetch(url, { headers: { authorization: 'Bearer S' } });
    if (response.status !== 200) throw new Error(`HTTP ${response.status}`);
    await response.arrayBuffer();
  };
  const typed = async () => {
    if ((await kv.get('greeting'))?.value !== 'hello') throw new Error('wrong value');
  };
  const time = async (fn: () => Promise<void>, n: number) => {
    const start = process.hrtime.bigint();
    for (let i = 0; i < n; i++) await fn();
    return Number(process.hrtime.bigint() - start) / 1000;
  };
  // Warm both paths (connections, JIT) before measuring.
  await time(bare, 300);
  await time(typed, 300);
  let bareUs = 0;
  let typedUs = 0;
  // Per-round differences: the machine's load drifts between rounds, far less within one. The
  // order alternates, so neither side always runs on the warmer (or busier) machine.
  const differences: number[] = [];
  const perRound = CALLS / ROUNDS;
  for (let round = 0; round < ROUNDS; round++) {
    let bareRound: number;
    let typedRound: number;
    if (round % 2 === 0) {
      bareRound = await time(bare, perRound);
      typedRound = await time(typed, perRound);
    } else {
      typedRound = await time(typed, perRound);
      bareRound = await time(bare, perRound);
    }
    bareUs += bareRound;
    typedUs += typedRound;
    differences.push((typedRound - bareRound) / perRound);
  }
  differences.sort((x, y) => x - y);
  const perBare = bareUs / CALLS;
  const perTyped = typedUs / CALLS;
  const size = await bundleSize();
  const result = {
    calls: CALLS,
    bare_fetch_us_per_call: Number(perBare.toFixed(1)),
    client_get_us_per_call: Number(perTyped.toFixed(1)),
    overhead_us_per_call: Number((perTyped - perBare).toFixed(1)),
    overhead_us_per_call_median_of_rounds: Number(differences[Math.floor(ROUNDS / 2)]!.toFixed(1)),
    bundle_min_bytes: size.raw,
    bundle_min_gzip_bytes: size.gzipped,
    node: process.version,
  };
  console.log(JSON.stringify(result, null, 2));
} finally {
  await server.stop();
  rmSync(tmp, { recursive: true, force: true });
}
