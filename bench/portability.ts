import { createReadStream, createWriteStream, statSync } from 'node:fs';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';

export interface PortabilityResult {
  keys: number;
  exportBytes: number;
  exportSeconds: number;
  exportKeysPerSecond: number;
  importSeconds: number;
  importKeysPerSecond: number;
}

/**
 * Export and import rates (keys/s) of one bucket of `keys` keys: the export streamed to a file
 * (snapshot included), then that file imported into a fresh bucket (staging, check and apply).
 */
export async function measurePortability(
  url: string,
  bucket: string,
  keys: number,
  file: string,
  newBucket: () => Promise<string>,
): Promise<PortabilityResult> {
  let started = performance.now();
  const exported = await fetch(`${url}/api/v1/${bucket}/?export=true`);
  if (exported.status !== 200 || !exported.body) throw new Error(`export answered ${exported.status}`);
  await pipeline(Readable.fromWeb(exported.body as never), createWriteStream(file));
  const exportSeconds = (performance.now() - started) / 1000;
  const target = await newBucket();
  started = performance.now();
  const imported = await fetch(`${url}/api/v1/${target}`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-ndjson' },
    body: Readable.toWeb(createReadStream(file)) as never,
    duplex: 'half',
  } as RequestInit);
  const answer = await imported.text();
  if (imported.status !== 200) throw new Error(`import answered ${imported.status}: ${answer}`);
  const importSeconds = (performance.now() - started) / 1000;
  return {
    keys,
    exportBytes: statSync(file).size,
    exportSeconds,
    exportKeysPerSecond: Math.round(keys / exportSeconds),
    importSeconds,
    importKeysPerSecond: Math.round(keys / importSeconds),
  };
}
