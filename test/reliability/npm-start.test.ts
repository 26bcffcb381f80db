import { execa } from 'execa';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { deadUrl } from '../helpers/cli.js';

/**
 * `npm start` runs the built server without building first (the build runs once, at
 * `npm ci`/`npm install` through `prepare`, and in `npm test`), and SIGTERM to npm stops the
 * server: the script `exec`s node, so no shell is left between npm's signal and the server.
 */
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('npm start', () => {
  it('the scripts: prepare builds, test builds, start does not', () => {
    const { scripts } = JSON.parse(readFileSync(`${ROOT}/package.json`, 'utf8')) as { scripts: Record<string, string> };
    expect(scripts.prepare).toBe('npm run build');
    expect(scripts.test).toMatch(/^npm run build && /);
    expect(scripts.prestart).toBeUndefined();
    expect(scripts.start).toMatch(/^exec node /);
  });

  it('starts without building on the port the README says to pass (npm start -- --port N), and SIGTERM to npm leaves no server running', {
    timeout: 60_000,
  }, async () => {
    const port = new URL(await deadUrl()).port;
    const npm = execa('npm', ['start', '--', '--port', port], {
      cwd: ROOT,
      env: { KVB_HOST: '127.0.0.1', KVB_DB: ':memory:', KVB_LOG_FORMAT: 'json' },
      reject: false,
      all: true,
      buffer: false,
      forceKillAfterDelay: false,
    });
    let output = '';
    npm.all?.setEncoding('utf8');
    const listening = new Promise<number>((resolve, reject) => {
      npm.all?.on('data', (chunk: string) => {
        output += chunk;
        const match = /"pid":(\d+)[^\n]*listening on/.exec(output);
        if (match) resolve(Number(match[1]));
      });
      void npm.then(() => reject(new Error(`npm start ended early:\n${output}`)));
    });
    const serverPid = await listening;
    expect(output).toContain(`listening on http://127.0.0.1:${port} `);
    expect(output).not.toMatch(/tsc -p|build-bundle|> kvb@[\d.]+ build/);
    // npm's own exit, not the end of its output (a server left behind would hold that open).
    const npmExited = new Promise((resolve) => npm.once('exit', resolve));
    npm.kill('SIGTERM');
    await npmExited;
    // The server ends its drain and exits; wait for that (an event), bounded.
    try {
      await expect.poll(() => alive(serverPid), { timeout: 20_000, interval: 50 }).toBe(false);
    } finally {
      if (alive(serverPid)) process.kill(serverPid, 'SIGKILL');
    }
    expect(output).toContain('"msg":"stopped"');
  });
});
