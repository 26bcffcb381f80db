import { defineConfig } from 'vitest/config';

/**
 * Two projects: `sqlite` runs everything; `postgres` runs the black-box HTTP suite, the store
 * conformance suite and the multi-instance tests again with KVB_TEST_BACKEND=postgres, and exists
 * only when KVB_TEST_POSTGRES_URL names a PostgreSQL the tests may create schemas in.
 */
const postgresUrl = process.env.KVB_TEST_POSTGRES_URL;
// The config is loaded more than once per run; say it once.
if (process.env.KVB_TEST_NOTICE_SHOWN) {
  // already said
} else if (postgresUrl) {
  console.log(`PostgreSQL tests: on (${postgresUrl.replace(/\/\/[^@/]*@/, '//…@')})`);
} else {
  console.log('PostgreSQL tests: SKIPPED (set KVB_TEST_POSTGRES_URL=postgres://user@host:5432/db to run them)');
}
process.env.KVB_TEST_NOTICE_SHOWN = '1';

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Black-box suites spawn real servers; two cores, so keep parallelism modest.
    maxWorkers: 4,
    projects: [
      {
        extends: true,
        // Without PostgreSQL the multi-instance files run here only to report themselves skipped.
        test: { name: 'sqlite', include: ['test/**/*.test.ts'], exclude: postgresUrl ? ['test/multi-instance/**'] : [] },
      },
      ...(postgresUrl
        ? [
            {
              extends: true as const,
              test: {
                name: 'postgres',
                include: [
                  'test/http/**/*.test.ts',
                  'test/store/**/*.test.ts',
                  'test/multi-instance/**/*.test.ts',
                  'test/reliability/fuzz.test.ts',
                  'test/reliability/idle-sockets.test.ts',
                ],
                env: { KVB_TEST_BACKEND: 'postgres' },
              },
            },
          ]
        : []),
    ],
  },
});
