import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { withClient } from '../helpers/backend.js';
import { lockCluster as lockClusterIn } from '../helpers/ha-cluster-lock.js';
import { sleep } from './workload.js';

/**
 * The Patroni HA cluster .ci/start-ha-cluster starts (KVB_TEST_HA_DIR/cluster.json lists its
 * nodes), driven through Patroni's REST API as test/multi-instance/failover.test.ts drives it, and
 * sharing that test's lock, so a robustness run and a failover test never fail the cluster over at
 * the same time.
 */

interface ClusterNode {
  name: string;
  rest: string;
  port: number;
  dataDir: string;
}

const haDir = () => process.env.KVB_TEST_HA_DIR!;
const nodes = (): ClusterNode[] => (JSON.parse(readFileSync(join(haDir(), 'cluster.json'), 'utf8')) as { nodes: ClusterNode[] }).nodes;

async function restStatus(url: string, init: RequestInit = {}, timeoutMs = 2000): Promise<number | undefined> {
  try {
    const res = await fetch(url, { ...init, signal: AbortSignal.timeout(timeoutMs) });
    await res.text();
    return res.status;
  } catch {
    return undefined;
  }
}

async function until<T>(what: string, probe: () => Promise<T | undefined>, ms: number, every = 250): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const found = await probe();
    if (found !== undefined) return found;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms / 1000} s`);
    await sleep(every);
  }
}

/** A leader that takes writes and a synchronous standby, as Patroni's health endpoints say. */
async function healthy(): Promise<{ leader: ClusterNode; standby: ClusterNode } | undefined> {
  let leader: ClusterNode | undefined;
  let standby: ClusterNode | undefined;
  for (const node of nodes()) {
    if ((await restStatus(`${node.rest}/primary`)) === 200) leader = node;
    else if ((await restStatus(`${node.rest}/sync`)) === 200) standby = node;
  }
  return leader && standby ? { leader, standby } : undefined;
}

export async function waitHealthy(ms = 90_000): Promise<{ leader: ClusterNode; standby: ClusterNode }> {
  return until('a primary with a synchronous standby', healthy, ms);
}

async function leaderName(): Promise<string | undefined> {
  for (const node of nodes()) if ((await restStatus(`${node.rest}/primary`)) === 200) return node.name;
  return undefined;
}

/** Waits until a node other than `old` leads and takes writes. */
async function waitNewLeader(old: string): Promise<string> {
  return until(
    'a new primary',
    async () => {
      const name = await leaderName();
      return name !== undefined && name !== old ? name : undefined;
    },
    60_000,
  );
}

/** A planned switchover to the synchronous standby; resolves once the standby leads. */
export async function switchover(): Promise<string> {
  const { leader, standby } = await waitHealthy();
  const status = await restStatus(
    `${leader.rest}/switchover`,
    {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ leader: leader.name, candidate: standby.name }),
    },
    60_000,
  ); // Patroni answers once the switchover is done, seconds later on a busy machine.
  if (status !== 200) throw new Error(`switchover: Patroni answered ${status}`);
  return `switchover ${leader.name} -> ${await waitNewLeader(leader.name)}`;
}

/** kill -9 of the primary's postmaster; resolves once another node leads. */
export async function killPrimary(): Promise<string> {
  const { leader } = await waitHealthy();
  const pid = Number(readFileSync(join(leader.dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  process.kill(pid, 'SIGKILL');
  return `kill -9 of ${leader.name}'s postmaster (pid ${pid}) -> ${await waitNewLeader(leader.name)}`;
}

/** Runs `work` on a plain connection to the current primary. */
export async function onPrimary<T>(work: (client: import('pg').Client) => Promise<T>): Promise<T> {
  const { leader } = await waitHealthy();
  return withClient({ host: '127.0.0.1', port: leader.port, user: 'postgres', database: 'postgres' }, work);
}

/** Takes the cluster lock the failover test takes; returns its release. */
export const lockCluster = (ms = 300_000): Promise<() => void> => lockClusterIn(haDir(), ms);
