// Takes docs/console.png, the picture of the web console in docs/console.md: a spawned server, a small
// sample bucket, headless Chromium. Usage: npm run console:screenshot
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const bin = new URL('../bin/kvb', import.meta.url).pathname;
const out = new URL('../docs/console.png', import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), 'kvb-screenshot-'));

async function serve(): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn('node', [bin, 'serve', '--port', '0', '--host', '127.0.0.1', '--db', join(dir, 'kvb.db')], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const url = await new Promise<string>((resolve, reject) => {
    let output = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      const match = /listening on (http:\/\/[^\s"]+)/.exec(output);
      if (match) resolve(match[1]!);
    });
    child.once('exit', () => reject(new Error(`kvb serve exited:\n${output}`)));
  });
  return { url, child };
}

const { url, child } = await serve();
try {
  const secret = 'screenshot-secret-key';
  const created = await fetch(`${url}/api/v1/`, {
    method: 'POST',
    body: new URLSearchParams({ email: 'ops@example.com', secret_key: secret, signing_key: 'signing' }),
  });
  const bucket = (await created.text()).trim();
  const auth = { authorization: `Bearer ${secret}`, 'content-type': 'application/json' };
  const txn = [
    {
      set: 'config/feature-flags',
      value: { checkout_v2: true, dark_mode: 'beta', rollout: { percent: 25, regions: ['eu-west', 'us-east'] } },
    },
    { set: 'config/motd', value: 'Maintenance window: Sunday 02:00 UTC' },
    { set: 'sessions/7f3a9c', value: { user: 'alice', expires: '2026-12-01T10:00:00Z' }, ttl: 3600 },
    { set: 'sessions/b81e22', value: { user: 'bob' }, ttl: 600 },
    ...['alice', 'bob', 'carol', 'dave'].map((name, i) => ({ set: `users/${name}`, value: { name, plan: i % 2 ? 'pro' : 'free' } })),
  ];
  await fetch(`${url}/api/v1/${bucket}`, { method: 'POST', headers: auth, body: JSON.stringify({ txn }) });
  await fetch(`${url}/api/v1/${bucket}/stats%2Fvisits?ttl=0`, { method: 'POST', body: new TextEncoder().encode('18342') });
  await fetch(`${url}/api/v1/${bucket}/avatar.png`, {
    method: 'POST',
    headers: { 'content-type': 'application/octet-stream' },
    body: new Uint8Array([137, 80, 78, 71, 13, 10, 26, 10]),
  });

  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--headless', '--no-sandbox', '--disable-gpu'] });
  const page = await browser.newPage({ viewport: { width: 1280, height: 720 }, deviceScaleFactor: 1 });
  await page.goto(`${url}/console/`);
  await page.getByRole('textbox', { name: 'Bucket', exact: true }).fill(bucket);
  await page.getByLabel('Credential', { exact: true }).fill(secret);
  await page.getByRole('button', { name: 'Connect', exact: true }).click();
  await page.getByRole('button', { name: 'config/', exact: true }).click();
  await page.getByRole('button', { name: 'config/feature-flags', exact: true }).click();
  await page.getByLabel('Value (JSON, indented for display)').waitFor();
  await page.waitForTimeout(500);
  await page.screenshot({ path: out });
  await browser.close();
  console.log(`wrote ${out}`);
} finally {
  child.kill();
  rmSync(dir, { recursive: true, force: true });
}
