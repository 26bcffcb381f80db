import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyDelivery } from '../../src/server/webhooks/webhook-signature.js';
import { chromiumPresent, expectAccessible, launchChromium, recordProblems } from '../helpers/browser.js';
import { call, createBucket } from '../helpers/http.js';
import { type RunningServer, startServer } from '../helpers/server.js';
import { startReceiver } from '../helpers/webhook-receiver.js';

declare const navigator: { clipboard: { readText(): Promise<string> } };

const hasChromium = chromiumPresent('test/browser/webhooks-console.test.ts');
const ADMIN = 'console-webhooks-admin';

/**
 * The console's Webhooks screen in headless Chromium, against a real `kvb serve`
 * (--webhook-allow-private) delivering to a real receiver on 127.0.0.1: one bucket and one
 * webhook through its whole life, each step checked in the page and against the server.
 */
describe.skipIf(!hasChromium)("the console's Webhooks screen", { timeout: 180_000 }, () => {
  let server: RunningServer;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let browser: Browser;
  let page: Page;
  let bucket: string;
  const problems: string[] = [];
  const auth = { authorization: `Bearer ${ADMIN}` };
  const button = (name: string) => page.getByRole('button', { name, exact: true });
  const set = async (key: string, value: string) =>
    expect((await call(`${server.api}/${bucket}/${key}`, { method: 'PUT', body: value, headers: auth })).status).toBe(200);
  const stored = async () =>
    (await call(`${server.api}/webhooks/${bucket}`, { headers: auth })).json() as Array<{ id: string; state: string; position: number }>;
  /** The events the receiver acknowledged for `key`, each with its request's signature checked against `secret`. */
  const deliveredWith = (key: string, secret: string) =>
    receiver.received.filter(
      (r) =>
        r.events.some((e) => e.key === key) &&
        verifyDelivery(secret, String(r.headers['kvb-signature']), r.body, Math.floor(Date.now() / 1000)),
    ).length;
  /** Opens the shown-once secret dialog's value, checks the copy button, and closes it. */
  const takeSecret = async () => {
    const dialog = page.getByRole('dialog');
    await expect.poll(() => dialog.getByText('it is not shown again').count()).toBe(1);
    const secret = await dialog.getByLabel('Signing secret').inputValue();
    expect(secret).toMatch(/^whsec_/);
    await dialog.getByRole('button', { name: 'Copy secret' }).click();
    await expect.poll(() => page.evaluate(() => navigator.clipboard.readText())).toBe(secret);
    await expectAccessible(page, 'webhooks (secret shown)', ['minor', 'moderate', 'serious', 'critical']);
    await dialog.getByRole('button', { name: 'I have copied it' }).click();
    await expect.poll(() => page.getByRole('dialog').count()).toBe(0);
    return secret;
  };

  beforeAll(async () => {
    receiver = await startReceiver();
    server = await startServer({ args: ['--webhook-allow-private'] });
    bucket = await createBucket(server.api, { secret_key: ADMIN });
    browser = await launchChromium();
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: new URL(server.url).origin });
    page = await context.newPage();
    page.setDefaultTimeout(15_000);
    recordProblems(page, new URL(server.url).origin, problems, {
      ignoreConsole: /Failed to load resource: the server responded with a status of/,
    });
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await server?.stop();
    await receiver?.close();
  });

  it('adds a webhook (secret shown once), shows deliveries in its log, pauses, resumes, rotates, tests and deletes it', async () => {
    await page.goto(`${server.url}/console/`);
    await page.getByRole('textbox', { name: 'Bucket', exact: true }).fill(bucket);
    await page.getByLabel('Credential', { exact: true }).fill(ADMIN);
    await button('Connect').click();
    await button('Webhooks').click();
    await expect.poll(() => page.getByText('No webhooks yet').count()).toBe(1);
    await expectAccessible(page, 'webhooks (none)', ['minor', 'moderate', 'serious', 'critical']);

    // Added from the form: the secret is shown once, and the server has it (the receiver's check passes).
    await page.getByLabel('URL', { exact: true }).fill(receiver.url);
    await page.getByLabel(/^Key prefix/).fill('orders/');
    await button('Add webhook').click();
    let secret = await takeSecret();
    const [hook] = await stored();
    expect(hook).toMatchObject({ state: 'active' });
    await expect.poll(() => page.getByRole('heading', { name: `Webhook ${hook!.id}` }).count()).toBe(1);
    expect(await page.locator('table.webhooks tbody tr').innerText()).toMatch(/orders\/\s+set, delete, expire\s+active/);

    // A SET under the prefix reaches the receiver, signed; the log shows the attempt after a refresh.
    await set('orders/1', 'one');
    await set('other', 'not delivered');
    await expect.poll(() => deliveredWith('orders/1', secret), { timeout: 30_000 }).toBe(1);
    const log = page.locator('table.deliveries tbody tr');
    await expect
      .poll(async () => {
        await button('Refresh webhooks').click();
        return log.count();
      })
      .toBeGreaterThan(0);
    // Revision 1 alone, or with 2 (outside the prefix) when the delivery began after that commit too.
    expect(await log.first().innerText()).toMatch(/\s1(–2)?\s+200\s+\d+ ms/);
    await expect.poll(() => page.locator('.webhook-detail').innerText()).toMatch(/revision [12], [01] behind the bucket \(at 2\)/);
    expect(receiver.received.flatMap((r) => r.events).some((e) => e.key === 'other')).toBe(false);

    // Paused: nothing more is sent; resumed: what changed meanwhile is delivered.
    await button('Pause').click();
    await expect.poll(async () => (await stored())[0]?.state).toBe('paused');
    await expect.poll(() => page.locator('.webhook-detail').innerText()).toContain('paused by request');
    await set('orders/2', 'two');
    await button('Resume').click();
    await expect.poll(async () => (await stored())[0]?.state).toBe('active');
    await expect.poll(() => deliveredWith('orders/2', secret), { timeout: 30_000 }).toBe(1);

    // A test delivery, signed with the current secret.
    const before = receiver.received.length;
    await button('Send test delivery').click();
    await expect.poll(() => page.getByRole('status').filter({ hasText: 'A test delivery was sent' }).count()).toBe(1);
    expect(receiver.received.length).toBeGreaterThan(before);

    // Rotated: a new secret, shown once; the next delivery is signed with it.
    await button('Rotate secret').click();
    const rotated = await takeSecret();
    expect(rotated).not.toBe(secret);
    secret = rotated;
    await set('orders/3', 'three');
    await expect.poll(() => deliveredWith('orders/3', secret), { timeout: 30_000 }).toBe(1);
    await expectAccessible(page, 'webhooks (one open, with its log)', ['minor', 'moderate', 'serious', 'critical']);

    // Deleted after a confirmation: Cancel keeps it, Delete removes it.
    await button('Delete webhook').click();
    await page.getByRole('dialog').getByRole('button', { name: 'Cancel' }).click();
    expect((await stored()).length).toBe(1);
    await button('Delete webhook').click();
    await page.getByRole('dialog').getByRole('button', { name: 'Delete webhook' }).click();
    await expect.poll(() => page.getByText('No webhooks yet').count()).toBe(1);
    expect(await stored()).toEqual([]);
    expect(problems).toEqual([]);
  });
});
