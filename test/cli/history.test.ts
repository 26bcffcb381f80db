import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CliOptions, inTerminal, kvb } from '../helpers/cli.js';
import { call, createBucket } from '../helpers/http.js';
import { type RunningServer, startServer } from '../helpers/server.js';

let server: RunningServer;
let bucket: string;
const SECRET = 'cli-history-secret';

const run = (args: string[], options: CliOptions = {}) =>
  kvb(args, { ...options, env: { KVB_URL: server.url, KVB_BUCKET: bucket, KVB_TOKEN: SECRET, ...options.env } });

beforeAll(async () => {
  server = await startServer();
  bucket = await createBucket(server.api, { secret_key: SECRET, default_ttl: '0' });
});
afterAll(async () => {
  await server?.stop();
});

const revisionAfter = async (args: string[]) => {
  expect((await run(args)).exitCode).toBe(0);
  return Number((await call(`${server.api}/${bucket}`, { token: SECRET })).headers.get('kvb-revision'));
};

describe('kvb get --rev, kvb ls --rev, kvb history, kvb rollback', () => {
  it('reads a key and lists the bucket as of a revision; history is JSONL when piped, newest first', { timeout: 120_000 }, async () => {
    const r1 = await revisionAfter(['set', 'cfg/a', 'one', '--type', 'text']);
    const r2 = await revisionAfter(['set', 'cfg/a', 'two', '--type', 'text']);
    await revisionAfter(['set', 'cfg/b', 'b', '--type', 'text']);
    const r4 = await revisionAfter(['del', 'cfg/a']);
    expect((await run(['get', 'cfg/a', '--rev', String(r1)])).out).toBe('one');
    expect((await run(['get', 'cfg/a', '--rev', String(r2), '--json'])).out).toContain('"value":"two"');
    expect((await run(['get', 'cfg/a', '--rev', String(r4)])).exitCode).toBe(2);
    expect((await run(['ls', '--rev', String(r2)])).out).toBe('cfg/a\n');
    const listed = JSON.parse((await run(['ls', 'cfg/', '--rev', String(r4 - 1), '--values', '--format', 'json'])).out) as Array<{
      key: string;
      value: string;
    }>;
    expect(listed.map((e) => [e.key, e.value])).toEqual([
      ['cfg/a', 'two'],
      ['cfg/b', 'b'],
    ]);
    const history = await run(['history', 'cfg/a', '--values']);
    expect(history.exitCode).toBe(0);
    const lines = history.out
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { rev: number; operation: string; value: unknown });
    expect(lines.map((l) => [l.rev, l.operation, l.value])).toEqual([
      [r4, 'delete', null],
      [r2, 'set', 'two'],
      [r1, 'set', 'one'],
    ]);
    expect((await run(['history', 'cfg/a', '--limit', '1'])).out.trim().split('\n')).toHaveLength(1);
  });

  it('kvb history shows who made each change: the actor field in JSONL, an actor column in a table', { timeout: 120_000 }, async () => {
    const own = await createBucket(server.api, { secret_key: SECRET, signing_key: 'cli-history-sign', default_ttl: '0' });
    const env = { KVB_BUCKET: own };
    expect((await run(['set', 'who/a', 'x', '--type', 'text'], { env })).exitCode).toBe(0);
    const minted = await run(['mint-token', '--prefix', 'who/', '--permissions', 'read,write', '--ttl', '600', '--json'], { env });
    expect(minted.exitCode, minted.stderr).toBe(0);
    const token = JSON.parse(minted.out) as { access_token: string; id: string };
    expect((await run(['set', 'who/a', 'y', '--type', 'text'], { env: { ...env, KVB_TOKEN: token.access_token } })).exitCode).toBe(0);
    const piped = await run(['history', 'who/a'], { env });
    expect(piped.exitCode, piped.stderr).toBe(0);
    expect(
      piped.out
        .trim()
        .split('\n')
        .map((l) => (JSON.parse(l) as { actor: unknown }).actor),
    ).toEqual([
      { kind: 'token', token_id: token.id, address: '127.0.0.1' },
      { kind: 'secret', token_id: null, address: '127.0.0.1' },
    ]);
    const table = await run(['history', 'who/a', '--format', 'table'], { env });
    expect(table.exitCode, table.stderr).toBe(0);
    expect(table.out.split('\n')[0]).toMatch(/\bactor\b/);
    expect(table.out).toContain(`token:${token.id}@127.0.0.1`);
    expect(table.out).toContain('secret@127.0.0.1');
    expect(table.out).not.toContain(token.access_token);
    // --actor: only that token's changes (the secret key may filter; the token itself may not).
    const filtered = await run(['history', 'who/a', '--actor', `token:${token.id}`], { env });
    expect(filtered.exitCode, filtered.stderr).toBe(0);
    expect(
      filtered.out
        .trim()
        .split('\n')
        .map((l) => (JSON.parse(l) as { actor: { kind: string } }).actor.kind),
    ).toEqual(['token']);
    const refused = await run(['history', 'who/a', '--actor', 'secret'], { env: { ...env, KVB_TOKEN: token.access_token } });
    expect(refused.exitCode).toBe(3);
  });

  it("kvb history without a key: the bucket's change log, by --actor, --prefix and --since; a table with a key column", {
    timeout: 120_000,
  }, async () => {
    const own = await createBucket(server.api, { secret_key: SECRET, signing_key: 'cli-log-sign', default_ttl: '0' });
    const env = { KVB_BUCKET: own };
    expect((await run(['set', 'app/a', '1', '--type', 'text'], { env })).exitCode).toBe(0);
    const minted = await run(['mint-token', '--prefix', 'app/', '--permissions', 'read,write', '--ttl', '600', '--json'], { env });
    const token = JSON.parse(minted.out) as { access_token: string; id: string };
    const asToken = { env: { ...env, KVB_TOKEN: token.access_token } };
    expect((await run(['set', 'app/b', '2', '--type', 'text'], asToken)).exitCode).toBe(0);
    expect((await run(['set', 'app/a', '3', '--type', 'text'], asToken)).exitCode).toBe(0);
    expect((await run(['set', 'cfg/x', '4', '--type', 'text'], { env })).exitCode).toBe(0);
    const keysOf = (out: string) =>
      out
        .trim()
        .split('\n')
        .filter(Boolean)
        .map((l) => (JSON.parse(l) as { key: string }).key);

    const all = await run(['history'], { env });
    expect(all.exitCode, all.stderr).toBe(0);
    expect(keysOf(all.out)).toEqual(['app/a', 'app/b', 'app/a', 'cfg/x']);
    const byToken = await run(['history', '--actor', `token:${token.id}`], { env });
    expect(keysOf(byToken.out)).toEqual(['app/b', 'app/a']);
    const first = (JSON.parse(all.out.split('\n')[0]!) as { rev: number }).rev;
    expect(keysOf((await run(['history', '--prefix', 'app/', '--since', String(first)], { env })).out)).toEqual(['app/b', 'app/a']);
    expect(keysOf((await run(['history', '--since', '2000-01-01T00:00:00Z', '--limit', '1'], { env })).out)).toEqual(['app/a']);

    const table = await run(['history', '--actor', `token:${token.id}`, '--format', 'table'], { env });
    expect(table.exitCode, table.stderr).toBe(0);
    expect(table.out.split('\n')[0]).toMatch(/^rev\s+key\s+operation\b/);
    expect(table.out).toContain('app/b');
    // The secret key's alone; --prefix and --since belong to the change log, not to one key.
    expect((await run(['history'], asToken)).exitCode).toBe(3);
    const misplaced = await run(['history', 'app/a', '--since', '3'], { env });
    expect(misplaced.exitCode).toBe(1);
    expect(misplaced.stderr).toContain("--since is for the bucket's change log");
  });

  it('rollback: --dry-run changes nothing, a pipe without --yes is refused, --yes makes one new revision', {
    timeout: 120_000,
  }, async () => {
    const before = Number((await call(`${server.api}/${bucket}`, { token: SECRET })).headers.get('kvb-revision'));
    await revisionAfter(['set', 'cfg/a', 'three', '--type', 'text']);
    await revisionAfter(['set', 'other', 'x', '--type', 'text']);
    const now = await revisionAfter(['del', 'cfg/b']);
    const dry = await run(['rollback', '--to', String(before), '--prefix', 'cfg/', '--dry-run']);
    expect(dry.exitCode, dry.stderr).toBe(0);
    const plan = JSON.parse(dry.out) as { changed: number; changes: Array<{ key: string; action: string }> };
    expect(plan.changes.map((c) => [c.key, c.action])).toEqual([
      ['cfg/a', 'delete'],
      ['cfg/b', 'set'],
    ]);
    const refused = await run(['rollback', '--to', String(before)]);
    expect(refused.exitCode).toBe(1);
    expect(refused.stderr).toContain('--yes');
    const done = await run(['rollback', '--to', String(before), '--prefix', 'cfg/', '--yes']);
    expect(done.exitCode, done.stderr).toBe(0);
    expect((JSON.parse(done.out) as { revision: number }).revision).toBe(now + 1);
    expect((await run(['ls'])).out).toBe('cfg/b\nother\n');
    expect((await run(['history', 'cfg/b'])).out.split('\n')[0]).toContain('"operation":"rollback"');
  });

  it("an import is history like any write: the keys' newest change, the state before it still readable", { timeout: 120_000 }, async () => {
    const before = await revisionAfter(['set', 'cfg/b', 'b', '--type', 'text']);
    const exported = await run(['export']);
    expect(exported.exitCode, exported.stderr).toBe(0);
    const imported = await run(['import', '-', '--mode', 'replace'], { input: exported.stdout });
    expect(imported.exitCode, imported.stderr).toBe(0);
    const policy = await call(`${server.api}/${bucket}`, { token: SECRET });
    expect(Number(policy.headers.get('kvb-history-floor'))).toBeLessThan(before);
    expect((await run(['get', 'cfg/b', '--rev', String(before)])).out).toBe('b');
    expect((await run(['history', 'cfg/b'])).out.split('\n')[0]).toContain('"operation":"import"');
  });

  it('below the floor: bucket show names the floor, a revision below it exits 7', { timeout: 120_000 }, async () => {
    // History bounded to one byte and compacted every second: the floor soon rises to the bucket's revision.
    const bounded = await startServer({ args: ['--max-history-bytes-per-bucket', '1', '--sweep-interval', '1'] });
    try {
      const id = await createBucket(bounded.api, { secret_key: SECRET, default_ttl: '0' });
      const runThere = (args: string[], options: CliOptions = {}) =>
        kvb(args, { ...options, env: { KVB_URL: bounded.url, KVB_BUCKET: id, KVB_TOKEN: SECRET, ...options.env } });
      expect((await runThere(['set', 'cfg/b', 'a', '--type', 'text'])).exitCode).toBe(0);
      expect((await runThere(['set', 'cfg/b', 'b', '--type', 'text'])).exitCode).toBe(0);
      const floorNow = async () => {
        const policy = await call(`${bounded.api}/${id}`, { token: SECRET });
        return Number(policy.headers.get('kvb-history-floor')) === Number(policy.headers.get('kvb-revision'));
      };
      await expect.poll(floorNow, { timeout: 20_000, interval: 200 }).toBe(true);
      const floor = Number((await call(`${bounded.api}/${id}`, { token: SECRET })).headers.get('kvb-history-floor'));
      const show = await inTerminal(['bucket', 'show'], [], {
        KVB_URL: bounded.url,
        KVB_BUCKET: id,
        KVB_TOKEN: SECRET,
        PTY_COLUMNS: '200',
      });
      expect(show.output).toContain(`from revision ${floor}`);
      const gone = await runThere(['get', 'cfg/b', '--rev', String(floor - 1)]);
      expect(gone.exitCode).toBe(7);
      expect(gone.stderr).toContain(`starts at revision ${floor}`);
      expect((await runThere(['ls', '--rev', String(floor - 1)])).exitCode).toBe(7);
      expect((await runThere(['rollback', '--to', String(floor - 1), '--yes'])).exitCode).toBe(7);
      // At the floor the state reads back.
      expect((await runThere(['get', 'cfg/b', '--rev', String(floor)])).out).toBe('b');
      // A revision not made yet is a usage error (400).
      expect((await runThere(['rollback', '--to', '99999', '--yes'])).exitCode).toBe(1);
    } finally {
      await bounded.stop();
    }
  });
});
