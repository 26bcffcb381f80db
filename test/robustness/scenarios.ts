import type { ExtraWorkloads } from './extra-workloads.js';

/**
 * Every scenario of the robustness suite: a backend, how many kvb instances share it, and the
 * fault (nemesis) injected while the clients run.
 */

import { WEBHOOK_ARGS, WEBHOOK_ENV } from './webhooks.js';

/** `ha-pgbouncer`: the Patroni cluster through the PgBouncer in front of each node (both listed in the URL). */
export type Backend = 'sqlite' | 'postgres' | 'pgbouncer' | 'ha' | 'ha-pgbouncer';

export type Nemesis =
  /** No fault: the baseline every checker must pass on. */
  | 'none'
  /** kill -9 of a kvb instance, restarted at once on the same port (SQLite: the same file). */
  | 'kill'
  /** SIGSTOP of a kvb instance for 1 to 8 s, then SIGCONT (past the clients' 4 s timeout and the watchers' 6 s stall limit at times). */
  | 'pause'
  /** Through a TCP proxy to PostgreSQL: every connection cut, or new ones refused for ~1 s. */
  | 'cut'
  /** Patroni switchover to the synchronous standby, under load; again (once the cluster is whole) while the fault lasts. */
  | 'switchover'
  /** kill -9 of the primary's postmaster; Patroni promotes the synchronous standby. */
  | 'kill-primary'
  /** kill -9 of the instance holding a webhook's lease (another takes it over once the lease runs out), restarted at once. */
  | 'kill-holder';

export interface Scenario {
  name: string;
  backend: Backend;
  instances: number;
  nemesis: Nemesis;
  /** kvb serve arguments beyond the database. */
  args: string[];
  /** Workloads beyond the register, counter and bank clients (extra-workloads.ts). */
  extra?: ExtraWorkloads;
  /** Part of the CI profile. */
  ci: boolean;
  /** Runs the lock workload (fenced writes). */
  locks?: boolean;
  /** Adds webhooks and their receiver (webhooks.ts), checked by checkers/webhooks.ts. */
  webhooks?: boolean;
  /** Environment for the instances beyond the runner's (settings without a flag). */
  env?: Record<string, string>;
}

/** Every extra workload, with the sweeper running every second so expiries show in the feed within the run. */
const EVERY_EXTRA: ExtraWorkloads = { expiry: true, values: true, tokens: true, scopedWatchers: true };
const SWEEP_ARGS = ['--sweep-interval', '1'];

const PG_ARGS = ['--pool-size', '4'];
const HOOKS = { webhooks: true, env: WEBHOOK_ENV };

export const SCENARIOS: Scenario[] = [
  { name: 'sqlite-none', backend: 'sqlite', instances: 1, nemesis: 'none', args: [], ci: true },
  { name: 'sqlite-kill', backend: 'sqlite', instances: 1, nemesis: 'kill', args: [], ci: true },
  { name: 'sqlite-pause', backend: 'sqlite', instances: 1, nemesis: 'pause', args: [], ci: true },
  { name: 'sqlite-full-kill', backend: 'sqlite', instances: 1, nemesis: 'kill', args: ['--durability', 'full'], ci: true },
  { name: 'pg2-none', backend: 'postgres', instances: 2, nemesis: 'none', args: PG_ARGS, ci: true },
  { name: 'pg2-kill', backend: 'postgres', instances: 2, nemesis: 'kill', args: PG_ARGS, ci: true },
  { name: 'pg2-pause', backend: 'postgres', instances: 2, nemesis: 'pause', args: PG_ARGS, ci: true },
  { name: 'pg2-cut', backend: 'postgres', instances: 2, nemesis: 'cut', args: PG_ARGS, ci: true },
  { name: 'pg3-kill', backend: 'postgres', instances: 3, nemesis: 'kill', args: PG_ARGS, ci: true },
  { name: 'pgbouncer2-kill', backend: 'pgbouncer', instances: 2, nemesis: 'kill', args: PG_ARGS, ci: true },
  // Expiring keys, values of every type and size, temporary tokens with rotations, scoped watchers.
  { name: 'sqlite-extra-kill', backend: 'sqlite', instances: 1, nemesis: 'kill', args: SWEEP_ARGS, ci: true, extra: EVERY_EXTRA },
  {
    name: 'pg2-extra-cut',
    backend: 'postgres',
    instances: 2,
    nemesis: 'cut',
    args: [...PG_ARGS, ...SWEEP_ARGS],
    ci: true,
    extra: EVERY_EXTRA,
  },
  {
    name: 'pgbouncer2-extra-pause',
    backend: 'pgbouncer',
    instances: 2,
    nemesis: 'pause',
    args: [...PG_ARGS, ...SWEEP_ARGS],
    ci: true,
    extra: EVERY_EXTRA,
  },
  { name: 'ha2-switchover', backend: 'ha', instances: 2, nemesis: 'switchover', args: PG_ARGS, ci: true },
  { name: 'ha2-kill-primary', backend: 'ha', instances: 2, nemesis: 'kill-primary', args: PG_ARGS, ci: true },
  // The demoted node keeps answering through its PgBouncer, as a standby: no read may come from it.
  { name: 'ha2-pgbouncer-switchover', backend: 'ha-pgbouncer', instances: 2, nemesis: 'switchover', args: PG_ARGS, ci: true },
  // Lock holders paused past their TTL, each writing under its fencing token ({"check", "created"}).
  { name: 'sqlite-locks', backend: 'sqlite', instances: 1, nemesis: 'pause', args: [], ci: true, locks: true },
  { name: 'pg2-locks-kill', backend: 'postgres', instances: 2, nemesis: 'kill', args: PG_ARGS, ci: true, locks: true },
  // Webhooks to a receiver that fails some requests on purpose: kill -9 during deliveries, and of the lease holder.
  { name: 'webhook-kill', backend: 'sqlite', instances: 1, nemesis: 'kill', args: WEBHOOK_ARGS, ci: true, ...HOOKS },
  {
    name: 'pg2-webhook-kill',
    backend: 'postgres',
    instances: 2,
    nemesis: 'kill-holder',
    args: [...PG_ARGS, ...WEBHOOK_ARGS],
    ci: true,
    ...HOOKS,
  },
];

/** Why a scenario cannot run here (its service is missing), or undefined when it can. */
export function missingService(scenario: Scenario): string | undefined {
  switch (scenario.backend) {
    case 'sqlite':
      return undefined;
    case 'postgres':
      return process.env.KVB_TEST_POSTGRES_URL ? undefined : 'no PostgreSQL: KVB_TEST_POSTGRES_URL is not set';
    case 'pgbouncer':
      if (!process.env.KVB_TEST_POSTGRES_URL) return 'no PostgreSQL: KVB_TEST_POSTGRES_URL is not set';
      return process.env.KVB_TEST_PGBOUNCER_URL ? undefined : 'no PgBouncer: KVB_TEST_PGBOUNCER_URL is not set';
    case 'ha':
      return process.env.KVB_TEST_HA_URL && process.env.KVB_TEST_HA_DIR
        ? undefined
        : 'no HA cluster: KVB_TEST_HA_URL and KVB_TEST_HA_DIR are not set (start one with .ci/start-ha-cluster)';
    case 'ha-pgbouncer':
      return process.env.KVB_TEST_HA_PGBOUNCER_URL && process.env.KVB_TEST_HA_DIR
        ? undefined
        : 'no HA cluster with PgBouncers: KVB_TEST_HA_PGBOUNCER_URL and KVB_TEST_HA_DIR are not set (start one with .ci/start-ha-cluster)';
  }
}
