import { describe, expect, it } from 'vitest';
import { POSTGRES_URL, dropSchema, postgresUrl, uniqueName } from '../helpers/backend.js';
import { type StartOptions, startServer } from '../helpers/server.js';

const WARNING = 'applies to SQLite only and is ignored here';

describe('--durability: a setting a backend would ignore is said to be ignored', () => {
  it('SQLite takes it without a word', async () => {
    const server = await startServer({ args: ['--durability', 'full'] });
    try {
      expect(server.logs()).toContain('listening on');
      expect(server.logs()).not.toContain(WARNING);
    } finally {
      await server.stop();
    }
  });

  it.skipIf(!POSTGRES_URL)('PostgreSQL warns once when it is given (flag or environment), and not when it is left alone', async () => {
    const schema = uniqueName('durability');
    const db = postgresUrl({ schema });
    try {
      const cases: Array<[boolean, StartOptions]> = [
        [true, { args: ['--durability', 'full'] }],
        [true, { env: { KVB_DURABILITY: 'normal' } }],
        [false, {}],
      ];
      for (const [given, options] of cases) {
        const server = await startServer({ db, ...options });
        try {
          const warnings = server
            .logs()
            .split('\n')
            .filter((line) => line.includes(WARNING));
          expect(warnings).toHaveLength(given ? 1 : 0);
        } finally {
          await server.stop({ keepData: true });
        }
      }
    } finally {
      await dropSchema(schema);
    }
  });
});
