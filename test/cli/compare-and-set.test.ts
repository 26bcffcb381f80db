import { chmodSync, readFileSync, existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CliOptions, inTerminal, kvb } from '../helpers/cli.js';
import { call, createBucket } from '../helpers/http.js';
import { KVB_BIN, type RunningServer, startServer } from '../helpers/server.js';

let server: RunningServer;
let bucket: string;
const SECRET = 'cli-cas-secret';
const scripts = mkdtempSync(join(tmpdir(), 'kvb-cas-editors-'));

const env = () => ({ KVB_URL: server.url, KVB_BUCKET: bucket, KVB_TOKEN: SECRET });
const run = (args: string[], options: CliOptions = {}) => kvb(args, { ...options, env: { ...env(), ...options.env } });
const read = (key: string) => call(`${server.api}/${bucket}/${encodeURIComponent(key)}`, { token: SECRET });
const revisionOf = async (key: string) => Number((await read(key)).headers.get('kvb-revision'));

/** An $EDITOR: a shell script that gets the file to edit as $1. */
function editor(name: string, body: string): string {
  const path = join(scripts, name);
  writeFileSync(path, `#!/bin/sh\nset -e\n${body}\n`);
  chmodSync(path, 0o755);
  return path;
}

beforeAll(async () => {
  server = await startServer();
  bucket = await createBucket(server.api, { secret_key: SECRET });
});
afterAll(async () => {
  await server?.stop();
});

describe('kvb set, del and incr with --if-rev, --if-absent and --if-exists', () => {
  it('--if-absent creates once; a second create-only write exits 6 and changes nothing', async () => {
    expect((await run(['set', 'lock', 'me', '--if-absent'])).exitCode).toBe(0);
    const again = await run(['set', 'lock', 'you', '--if-absent']);
    expect(again.exitCode).toBe(6);
    expect(again.stderr).toMatch(/^kvb: precondition_failed \(412\): key "lock" .*revision \d+\n$/);
    expect((await read('lock')).text).toBe('me');
  });

  it('get --json carries the revision that --if-rev takes; a stale revision exits 6', async () => {
    await run(['set', 'conf', 'v1']);
    const got = JSON.parse((await run(['get', 'conf', '--json'])).out) as { revision: number };
    expect(got.revision).toBe(await revisionOf('conf'));
    expect((await run(['set', 'conf', 'v2', '--if-rev', String(got.revision)])).exitCode).toBe(0);
    const stale = await run(['set', 'conf', 'v3', '--if-rev', String(got.revision)]);
    expect(stale.exitCode).toBe(6);
    expect((await read('conf')).text).toBe('v2');
  });

  it('del --if-rev deletes only at that revision; --if-exists on a missing key exits 6', async () => {
    await run(['set', 'gone', 'x']);
    const rev = await revisionOf('gone');
    expect((await run(['del', 'gone', '--if-rev', String(rev + 1000)])).exitCode).toBe(6);
    expect((await read('gone')).status).toBe(200);
    expect((await run(['del', 'gone', '--if-rev', String(rev)])).exitCode).toBe(0);
    expect((await read('gone')).status).toBe(404);
    expect((await run(['incr', 'gone', '--if-exists'])).exitCode).toBe(6);
    expect((await read('gone')).status).toBe(404);
  });

  it('incr --if-rev applies at the current revision only', async () => {
    await run(['incr', 'count', '5']);
    const rev = await revisionOf('count');
    expect((await run(['incr', 'count', '--if-rev', String(rev)])).out).toBe('6\n');
    expect((await run(['incr', 'count', '--if-rev', String(rev)])).exitCode).toBe(6);
    expect((await read('count')).text).toBe('6');
  });

  it('contradicting conditions are a usage error (exit 1) before any request', async () => {
    const both = await run(['set', 'k', 'v', '--if-rev', '3', '--if-absent']);
    expect(both.exitCode).toBe(1);
    expect(both.stderr).toMatch(/cannot be used with/);
    expect((await read('k')).status).toBe(404);
  });
});

describe('kvb txn --check', () => {
  it('commits when every check holds, and otherwise exits 6 naming the failed checks, writing nothing', async () => {
    await run(['txn', '--set', 'from=100', '--set', 'to=0']);
    const from = await revisionOf('from');
    const to = await revisionOf('to');
    const ok = await run([
      'txn',
      '--check',
      `from@${from}`,
      '--check',
      `to@${to}`,
      '--check',
      'nobody:absent',
      '--set',
      'from=90',
      '--set',
      'to=10',
    ]);
    expect(ok.exitCode).toBe(0);
    const stale = await run(['txn', '--check', `from@${from}`, '--check', 'to:present', '--check', 'to:absent', '--set', 'from=0']);
    expect(stale.exitCode).toBe(6);
    expect(stale.stderr).toMatch(new RegExp(`checks failed: from@${from}, to:absent\\n$`));
    expect((await read('from')).text).toBe('90');
  });
});

describe('kvb edit', () => {
  it('opens JSON indented with its numbers untouched, and saves the edit compact with If-Match', async () => {
    await run(['set', 'doc', '{"big":12345678901234567890,"n":1}', '--type', 'json']);
    const seen = join(scripts, 'seen.json');
    const result = await run(['edit', 'doc'], { env: { EDITOR: editor('bump.sh', `cp "$1" ${seen}\nsed -i 's/"n": 1/"n": 2/' "$1"`) } });
    expect(result).toMatchObject({ exitCode: 0 });
    expect(result.stderr).toMatch(/saved \(revision \d+\)/);
    const { readFileSync } = await import('node:fs');
    expect(readFileSync(seen, 'utf8')).toBe('{\n  "big": 12345678901234567890,\n  "n": 1\n}\n');
    expect((await read('doc')).text).toBe('{"big":12345678901234567890,"n":2}');
  });

  it('an unchanged file writes nothing', async () => {
    await run(['set', 'same', '{"a":1}', '--type', 'json']);
    const before = await revisionOf('same');
    const result = await run(['edit', 'same'], { env: { EDITOR: 'true' } });
    expect(result.exitCode).toBe(0);
    expect(result.stderr).toContain('unchanged; nothing written');
    expect(await revisionOf('same')).toBe(before);
  });

  it('refuses JSON that does not parse and a number that is not one, writing nothing', async () => {
    await run(['set', 'cfg', '{"a":1}', '--type', 'json']);
    const bad = await run(['edit', 'cfg'], { env: { EDITOR: editor('break.sh', `printf '{\\n  "a": 1\\n  "b": 2\\n}\\n' > "$1"`) } });
    expect(bad.exitCode).toBe(1);
    // Where it broke, as an editor counts (line 3, column 3: the missing comma before "b"), and the edit kept.
    const kept = /^kvb: the edited value is not valid JSON: line 3, column 3: .+; your version is in (\S+value\.json)\n$/.exec(bad.stderr);
    expect(kept, bad.stderr).not.toBeNull();
    expect(readFileSync(kept![1]!, 'utf8')).toBe('{\n  "a": 1\n  "b": 2\n}\n');
    expect((await read('cfg')).text).toBe('{"a":1}');
    await run(['set', 'n', '7']);
    const notInt = await run(['edit', 'n'], { env: { EDITOR: editor('word.sh', `printf 'seven' > "$1"`) } });
    expect(notInt.exitCode).toBe(1);
    expect((await read('n')).text).toBe('7');
  });

  it('keeps text without the trailing newline an editor adds, and keeps the expiry', async () => {
    await run(['set', 'motd', 'hello', '--type', 'text', '--ttl', '5000']);
    const before = (await read('motd')).headers.get('kvb-expires-at');
    expect((await run(['edit', 'motd'], { env: { EDITOR: editor('text.sh', `printf 'good morning\\n' > "$1"`) } })).exitCode).toBe(0);
    const after = await read('motd');
    expect(after.text).toBe('good morning');
    expect(Math.abs(Date.parse(after.headers.get('kvb-expires-at')!) - Date.parse(before!))).toBeLessThan(3000);
  });

  it('a key that does not exist opens empty and saving creates it with If-None-Match, typed as kvb set types an argument', async () => {
    const seen = join(scripts, 'seen-new.txt');
    const text = await run(['edit', 'new/text'], {
      env: {
        EDITOR: editor(
          'new-text.sh',
          `cp "$1" ${seen}
printf 'hello\n' > "$1"`,
        ),
      },
    });
    expect(text.exitCode, text.stderr).toBe(0);
    expect(text.stderr).toMatch(/created \(revision \d+\)/);
    expect(readFileSync(seen, 'utf8')).toBe('');
    const created = await read('new/text');
    expect([created.text, created.headers.get('kvb-type')]).toEqual(['hello', 'text']);
    const json = await run(['edit', 'new/json'], { env: { EDITOR: editor('new-json.sh', `printf '{\n  "a": [1, 2]\n}\n' > "$1"`) } });
    expect(json.exitCode, json.stderr).toBe(0);
    expect([(await read('new/json')).text, (await read('new/json')).headers.get('kvb-type')]).toEqual(['{"a":[1,2]}', 'json']);
    const number = await run(['edit', 'new/int'], { env: { EDITOR: editor('new-int.sh', `printf '42\n' > "$1"`) } });
    expect(number.exitCode, number.stderr).toBe(0);
    expect((await read('new/int')).headers.get('kvb-type')).toBe('int64');
    // Left empty: nothing created.
    const empty = await run(['edit', 'new/empty'], { env: { EDITOR: 'true' } });
    expect(empty.exitCode).toBe(0);
    expect(empty.stderr).toContain('nothing created');
    expect((await read('new/empty')).status).toBe(404);
    // Created by someone else while the editor was open: not overwritten, the edit kept, exit 6.
    const sneaky = editor(
      'new-race.sh',
      `node ${KVB_BIN} set new/race theirs
printf 'mine\n' > "$1"`,
    );
    const race = await run(['edit', 'new/race'], { env: { EDITOR: sneaky } });
    expect(race.exitCode).toBe(6);
    expect(race.stderr).toContain('was created while you were editing it');
    expect((await read('new/race')).text).toBe('theirs');
  });

  it('refuses binary values with a hint', async () => {
    await run(['set', 'blob', '-'], { input: Buffer.from([0xff, 0x00, 0xfe]) });
    const result = await run(['edit', 'blob'], { env: { EDITOR: 'true' } });
    expect(result.exitCode).toBe(1);
    expect(result.stderr).toMatch(/binary data.*kvb get blob -o FILE/);
  });

  it('on a change made meanwhile: says so, keeps the edited file and exits 6 without a terminal', async () => {
    await run(['set', 'race', '{"a":1}', '--type', 'json']);
    const sneaky = editor('race.sh', `node ${KVB_BIN} set race '{"a":9}' --type json\nsed -i 's/1/2/' "$1"`);
    const result = await run(['edit', 'race'], { env: { EDITOR: sneaky } });
    expect(result.exitCode).toBe(6);
    const kept = /your version is in (\S+)/.exec(result.stderr)?.[1];
    expect(kept && existsSync(kept)).toBe(true);
    expect((await read('race')).text).toBe('{"a":9}');
  });

  it('at a terminal, offers to edit the current value after a conflict, and saves that edit', async () => {
    await run(['set', 'tty', '{"a":1}', '--type', 'json']);
    const marker = join(scripts, 'tty-once');
    const sneakyOnce = editor(
      'tty.sh',
      `if [ ! -e ${marker} ]; then touch ${marker}; node ${KVB_BIN} set tty '{"a":5}' --type json; fi\nsed -i 's/"a": \\([0-9]\\)/"a": 1\\1/' "$1"`,
    );
    const session = await inTerminal(['edit', 'tty'], [{ expect: 'Edit the current value instead?', send: 'y\r' }], {
      ...env(),
      EDITOR: sneakyOnce,
    });
    expect(session.timedOut).toBeNull();
    expect(session.output).toContain('changed while you were editing');
    expect(session.exitCode).toBe(0);
    expect((await read('tty')).text).toBe('{"a":15}');
  });
});
