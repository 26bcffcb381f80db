/** The servers the bench measures: kvb, the bare Fastify baseline, and the peers when installed. */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';
import { type Service, freePort, onPath, spawnLogged, stopChild, waitForOk } from './processes.js';

export interface HttpService extends Service {
  url: string;
  /** Several instances measured together (of one database): each gets its share of the load. */
  urls?: string[];
}

const ROOT = new URL('..', import.meta.url).pathname;

/** `KVB_BENCH_BIN` measures another build (an older checkout's bin/kvb) with this harness. */
export const KVB_BIN = process.env.KVB_BENCH_BIN ?? join(ROOT, 'bin/kvb');

/**
 * The baseline is compiled to plain JavaScript next to the bench (so it resolves fastify from
 * node_modules) and run with bare `node`, like the compiled kvb: a TypeScript loader would
 * slow its start-up and flatter kvb's.
 */
export function compileBaseline(name: 'baseline-server' | 'node-baseline-server' = 'baseline-server'): string {
  const source = readFileSync(join(ROOT, `bench/${name}.ts`), 'utf8');
  const { outputText } = ts.transpileModule(source, {
    compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
  });
  const dir = join(ROOT, 'bench/.build');
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${name}.mjs`);
  writeFileSync(file, outputText);
  return file;
}

/** kvb runs as installed: `bin/kvb` itself, so its shebang's Node flags apply. */
export function kvbArgs(port: number | string, db: string, extra: string[] = []): string[] {
  return ['serve', '--port', String(port), '--host', '127.0.0.1', '--db', db, ...extra];
}

export async function startKvb(name: string, tmp: string, db: string, extra: string[] = []): Promise<HttpService> {
  const port = await freePort();
  const child = spawnLogged(KVB_BIN, kvbArgs(port, db, extra), join(tmp, `${name}.log`));
  const url = `http://127.0.0.1:${port}`;
  await waitForOk(`${url}/health`);
  return { name, url, children: [child], stop: () => stopChild(child) };
}

export async function startBaseline(tmp: string, script: string, name = 'baseline'): Promise<HttpService> {
  const port = await freePort();
  const child = spawnLogged(process.execPath, [script, String(port)], join(tmp, `${name}.log`));
  const url = `http://127.0.0.1:${port}`;
  await waitForOk(`${url}/health`);
  return { name, url, children: [child], stop: () => stopChild(child) };
}

/** Redis (no persistence) behind webdis, both on loopback; undefined when either is missing. */
export async function startWebdis(tmp: string): Promise<HttpService | undefined> {
  if (!onPath('redis-server') || !onPath('webdis')) return undefined;
  const redisPort = await freePort();
  const redis = spawnLogged(
    'redis-server',
    ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--daemonize', 'no'],
    join(tmp, 'redis.log'),
  );
  const httpPort = await freePort();
  const config = join(tmp, 'webdis.json');
  writeFileSync(
    config,
    JSON.stringify({
      redis_host: '127.0.0.1',
      redis_port: redisPort,
      http_host: '127.0.0.1',
      http_port: httpPort,
      threads: 2,
      pool_size: 20,
      daemonize: false,
      database: 0,
      verbosity: 0,
      logfile: join(tmp, 'webdis.log'),
    }),
  );
  const webdis = spawnLogged('webdis', [config], join(tmp, 'webdis.out'));
  const url = `http://127.0.0.1:${httpPort}`;
  await waitForOk(`${url}/PING`);
  return {
    name: 'webdis',
    url,
    children: [webdis, redis],
    stop: async () => {
      await stopChild(webdis);
      await stopChild(redis);
    },
  };
}

/** A single-member etcd on loopback, its data in the temp directory; undefined when missing. */
export async function startEtcd(tmp: string): Promise<HttpService | undefined> {
  if (!onPath('etcd')) return undefined;
  const clientPort = await freePort();
  const peerPort = await freePort();
  const client = `http://127.0.0.1:${clientPort}`;
  const peer = `http://127.0.0.1:${peerPort}`;
  const child = spawnLogged(
    'etcd',
    [
      '--name',
      'bench',
      '--data-dir',
      join(tmp, 'etcd'),
      '--listen-client-urls',
      client,
      '--advertise-client-urls',
      client,
      '--listen-peer-urls',
      peer,
      '--initial-advertise-peer-urls',
      peer,
      '--initial-cluster',
      `bench=${peer}`,
      '--log-level',
      'error',
    ],
    join(tmp, 'etcd.log'),
  );
  await waitForOk(`${client}/health`);
  return { name: 'etcd', url: client, children: [child], stop: () => stopChild(child) };
}
