// Compiled by test/unit/client-types.test.ts: typed reads and writes with the interfaces apps declare
// (an interface has no index signature, so a constraint that requires one would refuse all of these).
import { type Entry, connect } from 'kvb/client';

interface Replica {
  host: string;
  port: number;
  tags?: string[];
}

interface Config {
  theme: string;
  replicas: number;
  nested: { enabled: boolean; owner: string | null };
  primary: Replica;
  standbys: Replica[];
  note?: string;
  matrix: number[][];
}

type Point = { x: number; y: number };

export async function interfaces(): Promise<void> {
  const kv = connect({ url: 'http://127.0.0.1:8080', bucket: 'b' });

  const read = await kv.get<Config>('cfg/app');
  if (read) {
    const theme: string = read.value.theme;
    const port: number = read.value.primary.port;
    const firstTag: string | undefined = read.value.standbys[0]?.tags?.[0];
    const note: string | undefined = read.value.note;
    void [theme, port, firstTag, note];
  }

  const config: Config = {
    theme: 'dark',
    replicas: 2,
    nested: { enabled: true, owner: null },
    primary: { host: 'a', port: 1 },
    standbys: [{ host: 'b', port: 2, tags: ['eu'] }],
    matrix: [[1, 2]],
  };
  const written: Entry<Config> = await kv.set('cfg/app', config, { type: 'json' });
  void written.value.nested.enabled;

  const replicas = await kv.get<Replica[]>('cfg/replicas');
  void replicas?.value.map((r) => r.host);
  const point = await kv.get<Point>('cfg/point');
  void point?.value.x;
  await kv.update<Config>('cfg/app', (current) => ({ ...((current as Config | undefined) ?? config), replicas: 3 }));

  // The five value types still read as before.
  const text = await kv.get<string>('t');
  const big = await kv.get<bigint>('n');
  const bytes = await kv.get<Uint8Array>('b');
  void [text?.value.length, big?.value, bytes?.value.byteLength];
}
