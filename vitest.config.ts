import { defineConfig } from 'vitest/config';

/**
 * Three projects: `sqlite` runs everything (test/store runs every backend itself, and says which
 * it skipped); `postgres` runs the black-box HTTP suite and the multi-instance tests again with
 * KVB_TEST_BACKEND=postgres, and exists only when KVB_TEST_POSTGRES_URL names a PostgreSQL the
 * tests may create schemas in; `pgbouncer` runs the same suites with every server connecting
 * through PgBouncer in transaction pooling mode (KVB_TEST_PGBOUNCER_URL, started by .ci/run).
 * A fourth, `runtimes` (test/runtimes: the client under Deno and Bun), exists only for
 * `npm run test:runtimes`, and a fifth, `install` (the packed tarball installed as
 * docs/operations.md says, then the README's first use of the CLI), only for `npm run test:install`:
 * steps of their own that .ci/run runs once after `npm test`.
 */
const postgresUrl = process.env.KVB_TEST_POSTGRES_URL;
/** `npm run test:runtimes`: the client under Deno and Bun, a step of its own (see test/runtimes). */
const runtimes = process.env.KVB_TEST_RUNTIMES === '1';
/**
 * `npm run test:install`: test/packaging/global-install.test.ts, a step of its own after `npm test`
 * (its `npm pack` swaps the checkout's package.json while the other files would read it).
 */
const install = process.env.KVB_TEST_INSTALL === '1';
const INSTALL_TEST = 'test/packaging/global-install.test.ts';
const pgbouncerUrl = postgresUrl ? process.env.KVB_TEST_PGBOUNCER_URL : undefined;
/**
 * Files of test/http the PostgreSQL projects leave to `sqlite`, since no store is in what they
 * check: the OpenAPI document is made from the routes' schemas whatever the store (its two tests
 * that send requests check the examples against that validation and the policy's shape, which
 * the projects' own bucket, transaction and backend-parity suites check on each store).
 */
const STORE_INDEPENDENT = ['test/http/openapi-document.test.ts'];
// The config is loaded more than once per run; say it once.
if (process.env.KVB_TEST_NOTICE_SHOWN) {
  // already said
} else if (postgresUrl) {
  console.log(`PostgreSQL tests: on (${postgresUrl.replace(/\/\/[^@/]*@/, '//…@')})`);
  console.log(
    pgbouncerUrl
      ? `PgBouncer tests: on (${pgbouncerUrl.replace(/\/\/[^@/]*@/, '//…@')})`
      : 'PgBouncer tests: SKIPPED (set KVB_TEST_PGBOUNCER_URL to a PgBouncer in transaction mode in front of KVB_TEST_POSTGRES_URL; .ci/run starts one)',
  );
} else {
  console.log('PostgreSQL tests: SKIPPED (set KVB_TEST_POSTGRES_URL=postgres://user@host:5432/db to run them)');
}
if (!process.env.KVB_TEST_NOTICE_SHOWN) {
  console.log(
    process.env.KVB_TEST_HA_URL
      ? `PostgreSQL failover tests: on (${process.env.KVB_TEST_HA_URL})`
      : 'PostgreSQL failover tests: SKIPPED (start a Patroni cluster with .ci/start-ha-cluster and export what it prints)',
  );
}
process.env.KVB_TEST_NOTICE_SHOWN = '1';

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // expect.poll waits for an event (a page showing a result, a sweep having run); 1 s, vitest's
    // default, is too short on two busy cores (a console test lost its status line under load).
    expect: { poll: { timeout: 10_000 } },
    // Black-box suites spawn real servers; two cores, so keep parallelism modest.
    maxWorkers: 4,
    projects: [
      {
        extends: true,
        // Without PostgreSQL the multi-instance files run here only to report themselves skipped.
        test: {
          name: 'sqlite',
          include: ['test/**/*.test.ts'],
          exclude: ['test/runtimes/**', INSTALL_TEST, ...(postgresUrl ? ['test/multi-instance/**'] : [])],
        },
      },
      ...(runtimes ? [{ extends: true as const, test: { name: 'runtimes', include: ['test/runtimes/**/*.test.ts'] } }] : []),
      ...(install ? [{ extends: true as const, test: { name: 'install', include: [INSTALL_TEST] } }] : []),
      ...(postgresUrl
        ? [
            {
              extends: true as const,
              test: {
                name: 'postgres',
                include: [
                  'test/http/**/*.test.ts',
                  'test/multi-instance/**/*.test.ts',
                  'test/reliability/fuzz.test.ts',
                  'test/reliability/idle-sockets.test.ts',
                  'test/reliability/hardening.test.ts',
                  'test/reliability/drain.test.ts',
                  'test/reliability/metrics-surfaces.test.ts',
                ],
                exclude: STORE_INDEPENDENT,
                env: { KVB_TEST_BACKEND: 'postgres' },
              },
            },
          ]
        : []),
      ...(pgbouncerUrl
        ? [
            {
              extends: true as const,
              test: {
                name: 'pgbouncer',
                include: ['test/http/**/*.test.ts', 'test/multi-instance/**/*.test.ts'],
                exclude: STORE_INDEPENDENT,
                env: { KVB_TEST_BACKEND: 'pgbouncer' },
              },
            },
          ]
        : []),
    ],
  },
});
