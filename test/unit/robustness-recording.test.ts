import { type Server, type Socket, connect, createServer } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { Recorder } from '../robustness/recorder.js';
import { type Exchange, outcomeOf } from '../robustness/send.js';
import { TcpProxy } from '../helpers/tcp-proxy.js';

/**
 * The robustness suite's recording rules (test/robustness/README.md): how an answer counts, how a
 * multi-key request is recorded, and the TCP proxy its `cut` fault relies on.
 */

const answer = (status: number, text = ''): Exchange => ({ answer: { status, headers: {}, text } });

describe('how an answer counts', () => {
  it('2xx is ok; 412, 409, 404, 429 and a plain 503 are fails (nothing applied)', () => {
    expect(outcomeOf(answer(200))).toBe('ok');
    expect(outcomeOf(answer(204))).toBe('ok');
    for (const status of [400, 404, 409, 412, 429]) expect(outcomeOf(answer(status)), String(status)).toBe('fail');
    expect(outcomeOf(answer(503, '{"error":{"code":503,"message":"service_unavailable","detail":"storage is unavailable"}}'))).toBe('fail');
  });

  it('a 503 that may or may not have applied, another 5xx, and no answer after sending are unknown', () => {
    const lost =
      '{"error":{"code":503,"message":"service_unavailable","detail":"storage is unavailable: the connection was lost while committing, so the write may or may not have been applied"}}';
    expect(outcomeOf(answer(503, lost))).toBe('unknown');
    expect(outcomeOf(answer(500))).toBe('unknown');
    expect(outcomeOf({ error: { code: 'UND_ERR_HEADERS_TIMEOUT', sent: true } })).toBe('unknown');
    expect(outcomeOf({ error: { code: 'ECONNREFUSED', sent: false } })).toBe('fail');
  });
});

describe('recording', () => {
  it('a request on several keys is one op per key sharing a group and times; unknown returns at Infinity without output', () => {
    const r = new Recorder('t');
    r.record(
      1,
      'a',
      10,
      20,
      'ok',
      [
        { model: 'register', key: 'r/0', input: { f: 'write', value: 'x' }, output: { revision: 7 } },
        { model: 'register', key: 'r/1', input: { f: 'read' }, output: { value: null } },
      ],
      200,
    );
    r.record(1, 'a', 30, 40, 'unknown', [{ model: 'counter', key: 'c/0', input: { f: 'add', delta: 1 }, output: { value: 3 } }]);
    const [a, b, c] = r.ops;
    expect(a!.group).toBeDefined();
    expect(b!.group).toBe(a!.group);
    expect([a!.call, a!.ret, b!.call, b!.ret]).toEqual([10, 20, 10, 20]);
    expect([a!.status, a!.id === b!.id]).toEqual([200, false]);
    expect(c!.group).toBeUndefined();
    expect(c!.ret).toBe(Infinity);
    expect(c!.output).toBeUndefined();
  });
});

describe('the TCP proxy of the cut fault', () => {
  let echo: Server | undefined;
  let proxy: TcpProxy | undefined;
  afterEach(async () => {
    await proxy?.close();
    await new Promise((resolve) => (echo ? echo.close(resolve) : resolve(undefined)));
  });

  const startEcho = () =>
    new Promise<number>((resolve) => {
      echo = createServer((s) => s.pipe(s));
      echo.listen(0, '127.0.0.1', () => resolve((echo!.address() as { port: number }).port));
    });
  const open = (port: number) =>
    new Promise<Socket>((resolve, reject) => {
      const s = connect(port, '127.0.0.1', () => resolve(s));
      s.once('error', reject);
    });
  const roundTrip = (s: Socket, text: string) =>
    new Promise<string>((resolve) => {
      s.once('data', (d) => resolve(d.toString()));
      s.write(text);
    });

  it('passes bytes through, cut closes open connections, refuse refuses new ones until it opens again on the same port', async () => {
    proxy = new TcpProxy('127.0.0.1', await startEcho());
    await proxy.open();
    const port = proxy.port;
    const s = await open(port);
    expect(await roundTrip(s, 'ping')).toBe('ping');
    const closed = new Promise((resolve) => s.once('close', resolve));
    expect(proxy.cut()).toBe(1);
    await closed;
    await proxy.refuse();
    await expect(open(port)).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    await proxy.open();
    expect(proxy.port).toBe(port);
    const again = await open(port);
    expect(await roundTrip(again, 'pong')).toBe('pong');
    again.destroy();
  });
});
