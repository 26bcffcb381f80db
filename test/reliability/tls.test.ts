import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as tcpConnect } from 'node:net';
import { type TLSSocket, connect as tlsConnect } from 'node:tls';
import { execa } from 'execa';
import { Agent, fetch as undiciFetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect as connectBucket, createBucket as createBucketWith } from '../../src/client/index.js';
import { kvb } from '../helpers/cli.js';
import { KVB_BIN, type RunningServer, startServer } from '../helpers/server.js';
import { logged } from '../helpers/logged.js';

/** TLS in the binary, with certificates made by the real `openssl` into a temp dir. */
let dir: string;
const path = (name: string) => join(dir, name);
const openssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });

/** A server certificate for 127.0.0.1 and localhost, signed by the test CA. */
function issue(name: string, serial: string): void {
  openssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', '/CN=localhost');
  openssl(
    'x509',
    '-req',
    '-in',
    `${name}.csr`,
    '-CA',
    'ca.pem',
    '-CAkey',
    'ca.key',
    '-set_serial',
    serial,
    '-days',
    '2',
    '-out',
    `${name}.pem`,
    '-extfile',
    'san.cnf',
  );
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'kvb-tls-'));
  execFileSync('sh', ['-c', "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > san.cnf"], { cwd: dir });
  openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=kvb test CA');
  issue('first', '0x1001');
  issue('second', '0x2002');
  openssl('genpkey', '-algorithm', 'RSA', '-pkeyopt', 'rsa_keygen_bits:2048', '-out', 'stranger.key');
  copyFileSync(path('first.pem'), path('cert.pem'));
  copyFileSync(path('first.key'), path('key.pem'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const ca = () => readFileSync(path('ca.pem'));

/** Opens a TLS connection trusting the test CA; resolves once the handshake is done. */
function handshake(port: number, alpn?: string[]): Promise<TLSSocket> {
  return new Promise((resolve, reject) => {
    const socket = tlsConnect({ host: '127.0.0.1', port, ca: ca(), ...(alpn && { ALPNProtocols: alpn }) }, () => resolve(socket));
    socket.once('error', reject);
  });
}

/** One HTTP/1.1 request on an open (kept-alive) socket; resolves with the status line and body. */
function httpOn(socket: TLSSocket, target: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    const onData = (chunk: Buffer) => {
      text += chunk.toString('utf8');
      const head = text.indexOf('\r\n\r\n');
      const length = /content-length: (\d+)/i.exec(text);
      if (head !== -1 && length && text.length >= head + 4 + Number(length[1])) {
        socket.off('data', onData);
        resolve(text);
      }
    };
    socket.on('data', onData);
    socket.once('error', reject);
    socket.write(`GET ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
  });
}

const serveOnce = (args: string[]) =>
  execa('node', [KVB_BIN, 'serve', '--port', '0', '--host', '127.0.0.1', '--db', ':memory:', ...args], { reject: false, timeout: 20_000 });

describe('kvb serve --tls-cert/--tls-key', () => {
  let server: RunningServer;
  beforeAll(async () => {
    server = await startServer({ args: ['--tls-cert', path('cert.pem'), '--tls-key', path('key.pem')] });
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('serves HTTPS (HTTP/1.1 by ALPN), says so in its start-up line, and a client without the CA is refused', async () => {
    expect(server.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    const dispatcher = new Agent({ connect: { ca: ca() } });
    const res = await undiciFetch(`${server.url}/health`, { dispatcher });
    expect(res.status).toBe(200);
    await expect(fetch(`${server.url}/health`)).rejects.toThrow();
    const socket = await handshake(Number(new URL(server.url).port), ['h2', 'http/1.1']);
    expect(socket.alpnProtocol).toBe('http/1.1');
    socket.destroy();
    await dispatcher.close();
  });

  it('the CLI talks HTTPS with --ca or KVB_CA, and says why without it', async () => {
    const created = await kvb(['create-bucket', '--email', 'ops@example.com', '--url', server.url, '--ca', path('ca.pem')]);
    expect(created.exitCode, created.stderr).toBe(0);
    const bucket = created.out.trim().split(/\s+/)[0]!;
    const set = await kvb(['set', 'greeting', 'hello', '--url', server.url, '--bucket', bucket], { env: { KVB_CA: path('ca.pem') } });
    expect(set.exitCode, set.stderr).toBe(0);
    const got = await kvb(['get', 'greeting', '--url', server.url, '--bucket', bucket, '--ca', path('ca.pem')]);
    expect(got.out).toBe('hello');
    const untrusted = await kvb(['get', 'greeting', '--url', server.url, '--bucket', bucket]);
    expect(untrusted.exitCode, untrusted.stderr).toBe(4);
    expect(untrusted.stderr).toContain(`cannot reach ${server.url} (TLS: the server's certificate is signed by an unknown CA)`);
    expect(untrusted.stderr).toContain('--ca FILE or KVB_CA');
    expect(untrusted.stderr).not.toContain('unexpected error');
    const missing = await kvb(['get', 'greeting', '--url', server.url, '--bucket', bucket, '--ca', path('nope.pem')]);
    expect(missing.exitCode).toBe(1);
    expect(missing.stderr).toContain('cannot read the CA file');
  });

  it('names the likely mistake: http:// to this TLS port, a CA file that does not verify the server, a key file given as --ca', async () => {
    const plainUrl = server.url.replace('https://', 'http://');
    const plain = await kvb(['get', 'greeting', '--url', plainUrl, '--bucket', 'b']);
    expect(plain.exitCode, plain.stderr).toBe(4);
    expect(plain.stderr).toContain('use an https:// URL');
    // Another CA (the self-signed certificate below is its own): it was passed, so the hint says it does not verify.
    openssl(
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      'other.key',
      '-out',
      'other.pem',
      '-days',
      '2',
      '-subj',
      '/CN=other',
    );
    const wrong = await kvb(['get', 'greeting', '--url', server.url, '--bucket', 'b', '--ca', path('other.pem')]);
    expect(wrong.exitCode, wrong.stderr).toBe(4);
    expect(wrong.stderr).toContain(`the CA file ${path('other.pem')} (--ca or KVB_CA) does not verify it`);
    expect(wrong.stderr).not.toContain('pass its certificate with --ca');
    const key = await kvb(['get', 'greeting', '--url', server.url, '--bucket', 'b', '--ca', path('key.pem')]);
    expect(key.exitCode).toBe(1);
    expect(key.stderr).toContain(`the CA file ${path('key.pem')} (--ca or KVB_CA) holds a private key, not a certificate`);
  });

  it('https:// to a plain-HTTP server says the server may not speak TLS (try http://), not EPROTO', async () => {
    const plainServer = await startServer();
    try {
      const got = await kvb(['get', 'k', '--url', plainServer.url.replace('http://', 'https://'), '--bucket', 'b']);
      expect(got.exitCode, got.stderr).toBe(4);
      expect(got.stderr).toContain('(try http://)');
      expect(got.stderr).not.toContain('EPROTO');
      expect(got.stderr).not.toContain('--ca FILE');
    } finally {
      await plainServer.stop();
    }
  });

  it('kvb/client talks HTTPS through a fetch that trusts the CA', async () => {
    const dispatcher = new Agent({ connect: { ca: ca() } });
    const trusted = (url: string, init: unknown) => undiciFetch(url, { ...(init as object), dispatcher }) as never;
    const id = await createBucketWith({ url: server.url, fetch: trusted }, { email: 'ops@example.com' });
    const kv = connectBucket({ url: server.url, bucket: id, fetch: trusted });
    await kv.set('k', 'v');
    expect((await kv.get('k'))?.value).toBe('v');
    await dispatcher.close();
  });

  it('SIGHUP reloads the certificate for new handshakes without dropping open connections; a bad pair is refused and the old one kept', async () => {
    const port = Number(new URL(server.url).port);
    const open = await handshake(port);
    expect(open.getPeerCertificate().serialNumber).toBe('1001');
    expect(await httpOn(open, '/health')).toMatch(/^HTTP\/1\.1 200 /);

    copyFileSync(path('second.pem'), path('cert.pem'));
    copyFileSync(path('second.key'), path('key.pem'));
    server.process.kill('SIGHUP');
    await logged(server, /SIGHUP: reloaded the TLS certificate/);
    const fresh = await handshake(port);
    expect(fresh.getPeerCertificate().serialNumber).toBe('2002');
    fresh.destroy();
    // The connection opened before the reload is still served, on its own handshake.
    expect(await httpOn(open, '/health')).toMatch(/^HTTP\/1\.1 200 /);
    expect(open.getPeerCertificate().serialNumber).toBe('1001');
    open.destroy();

    copyFileSync(path('stranger.key'), path('key.pem'));
    server.process.kill('SIGHUP');
    await logged(server, /does not belong to the certificate .*; still serving the previous certificate/);
    const after = await handshake(port);
    expect(after.getPeerCertificate().serialNumber).toBe('2002');
    after.destroy();
    expect(server.process.exitCode).toBeNull();
  });
});

describe('a certificate the CLI does not trust is a network failure (exit 4), not an unexpected error', () => {
  let server: RunningServer;
  beforeAll(async () => {
    // Self-signed: the certificate is its own issuer, as `openssl req -x509` makes one for a quick set-up.
    openssl(
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      'self.key',
      '-out',
      'self.pem',
      '-days',
      '2',
      '-subj',
      '/CN=localhost',
      '-addext',
      'subjectAltName=IP:127.0.0.1',
    );
    server = await startServer({ args: ['--tls-cert', path('self.pem'), '--tls-key', path('self.key')] });
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('kvb get against a self-signed server without --ca exits 4 with the URL and a hint to use --ca or KVB_CA', async () => {
    const got = await kvb(['get', 'k', '--url', server.url, '--bucket', 'b']);
    expect(got.exitCode, got.stderr).toBe(4);
    expect(got.stderr).toContain(`kvb: cannot reach ${server.url} (TLS: the server's certificate is self-signed)`);
    expect(got.stderr).toContain('--ca FILE or KVB_CA');
    expect(got.stderr.trim().split('\n')).toHaveLength(1);
    const trusted = await kvb(['create-bucket', '--email', 'ops@example.com', '--url', server.url, '--ca', path('self.pem')]);
    expect(trusted.exitCode, trusted.stderr).toBe(0);
  });

  it('kvb version prints its own version and exits 4 when the certificate is not trusted', async () => {
    const result = await kvb(['version', '--url', server.url]);
    expect(result.exitCode, result.stderr).toBe(4);
    expect(result.out).toMatch(/^client \S+\n$/);
    expect(result.stderr).toContain('self-signed');
  });
});

/**
 * Resolves true once the server closes a TCP connection that sent `bytes` (maybe none) and then
 * nothing more, or false if it is still open after `ms`.
 */
function closedByServer(port: number, bytes: Buffer, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = tcpConnect(port, '127.0.0.1', () => {
      if (bytes.length > 0) socket.write(bytes);
    });
    socket.resume();
    // A guard that only bounds a hang: the close is the event waited for.
    const guard = setTimeout(() => {
      socket.destroy();
      resolve(false);
    }, ms);
    const done = () => {
      clearTimeout(guard);
      resolve(true);
    };
    socket.once('close', done);
    socket.once('error', () => socket.destroy());
  });
}

describe('the TLS port closes half-open handshakes at the header timeout', () => {
  // The bound is the plain port's header timeout (15 s by default), shortened here to 1 s. Node's
  // own handshake timeout is 120 s: without the bound both connections are still open at 10 s.
  let server: RunningServer;
  beforeAll(async () => {
    // (Not cert.pem/key.pem: the SIGHUP test above leaves them a mismatched pair.)
    server = await startServer({
      args: ['--tls-cert', path('first.pem'), '--tls-key', path('first.key')],
      env: { KVB_HEADERS_TIMEOUT_MS: '1000' },
    });
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('a connection that sends nothing, or 7 bytes of a ClientHello, is closed; a full handshake still works', {
    timeout: 40_000,
  }, async () => {
    const port = Number(new URL(server.url).port);
    // The first 7 bytes of a TLS 1.2+ ClientHello record: handshake type, version, length, type.
    const partialHello = Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00]);
    const [silent, partial] = await Promise.all([
      closedByServer(port, Buffer.alloc(0), 10_000),
      closedByServer(port, partialHello, 10_000),
    ]);
    expect({ silent, partial }).toEqual({ silent: true, partial: true });
    const socket = await handshake(port);
    expect(await httpOn(socket, '/health')).toMatch(/^HTTP\/1\.1 200 /);
    socket.destroy();
  });

  it('the plain port follows the same setting: headers that never finish are cut off', { timeout: 40_000 }, async () => {
    const plain = await startServer({ env: { KVB_HEADERS_TIMEOUT_MS: '1000' } });
    try {
      const port = Number(new URL(plain.url).port);
      expect(await closedByServer(port, Buffer.from('GET /health HTTP/1.1\r\nHost: x\r\n'), 10_000)).toBe(true);
    } finally {
      await plain.stop();
    }
  });
});

describe('kvb serve refuses TLS files it cannot use, in one line', () => {
  it('an unreadable file, a key of another certificate, or only one of the two flags: exit 1', async () => {
    const missing = await serveOnce(['--tls-cert', path('absent.pem'), '--tls-key', path('first.key')]);
    expect(missing.exitCode).toBe(1);
    expect(missing.stderr.trim()).toBe(`kvb: cannot read the TLS certificate ${path('absent.pem')}: no such file`);
    const mismatch = await serveOnce(['--tls-cert', path('first.pem'), '--tls-key', path('stranger.key')]);
    expect(mismatch.exitCode).toBe(1);
    expect(mismatch.stderr).toContain(`the TLS key ${path('stranger.key')} does not belong to the certificate ${path('first.pem')}`);
    const onlyCert = await execa('node', [KVB_BIN, 'serve', '--port', '0', '--db', ':memory:'], {
      reject: false,
      timeout: 20_000,
      env: { KVB_TLS_CERT: path('first.pem') },
    });
    expect(onlyCert.exitCode).toBe(1);
    expect(onlyCert.stderr).toContain('--tls-cert and --tls-key go together');
  });

  it('listening beyond loopback without TLS prints one warning line; on loopback none', async () => {
    const open = await startServer({ args: ['--host', '0.0.0.0'] });
    try {
      await logged(open, /without TLS/);
      const warnings = open
        .logs()
        .split('\n')
        .filter((line) => line.includes('without TLS'));
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toContain('clear text unless a proxy in front terminates TLS');
    } finally {
      await open.stop();
    }
    const local = await startServer();
    try {
      // The warning would come right after the start-up line, so before this request's access line.
      await fetch(`${local.url}/health`);
      await logged(local, /"route":"\/health"/);
      expect(local.logs()).not.toContain('without TLS');
    } finally {
      await local.stop();
    }
  });
});
