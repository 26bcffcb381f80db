import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Locator, Page } from 'playwright-core';
import { afterAll, beforeAll, beforeEach, describe, expect, it, type TestContext } from 'vitest';
import { chromiumPresent, launchChromium, recordProblems } from '../helpers/browser.js';
import { call } from '../helpers/http.js';
import { type RunningServer, startServer } from '../helpers/server.js';

/**
 * The interactive explorer, driven in headless Chromium against a real `kvb serve`: it must load
 * offline (every request to the same origin), and its Try it out must work end to end.
 */

const hasChromium = chromiumPresent('test/browser/explorer.test.ts');

let server: RunningServer;
let browser: Browser;
let page: Page;
let tempDir: string;
let failed = false;
/** Everything that went wrong in the page, checked after each step. */
const problems: string[] = [];
/** Every URL the page requested. */
const requested: string[] = [];

/** Saves a screenshot under the temp dir when the test fails, and says where. */
function screenshotOnFailure(context: TestContext, name: string): void {
  context.onTestFailed(async () => {
    failed = true;
    const path = join(tempDir, `${name}.png`);
    await page?.screenshot({ path, fullPage: true }).catch(() => undefined);
    console.error(`explorer test failed: screenshot at ${path}\nproblems in the page: ${JSON.stringify(problems, null, 2)}`);
  });
}

/** Expands an operation and presses "Try it out". */
async function tryOut(tag: string, operationId: string): Promise<Locator> {
  const operation = page.locator(`#operations-${tag}-${operationId}`);
  await operation.locator('.opblock-summary').first().click();
  await operation.locator('button.try-out__btn').click();
  await operation.locator('button.execute').waitFor();
  return operation;
}

const fillParameter = (operation: Locator, name: string, value: string) =>
  operation.locator(`tr[data-param-name="${name}"] input[type=text]`).fill(value);
const fillFormField = (operation: Locator, name: string, value: string) =>
  operation.locator(`tr[data-property-name="${name}"] input[type=text]`).fill(value);

/** Presses "Execute" and reads the response panel: status code and body as shown. */
async function execute(operation: Locator): Promise<{ status: number; body: string; url: string }> {
  await operation.locator('button.execute').click();
  const live = operation.locator('.live-responses-table');
  const statusCell = live.locator('tr.response .response-col_status');
  await statusCell.waitFor();
  const status = Number((await statusCell.innerText()).trim());
  const bodyPanel = live.locator('.response-col_description .highlight-code pre');
  const body = (await bodyPanel.count()) > 0 ? (await bodyPanel.first().innerText()).trim() : '';
  const url = (await operation.locator('.request-url pre').innerText()).trim();
  // A new Execute replaces the panel; clear it so the next call on this operation waits for its own answer.
  await operation.locator('button.btn-clear').click();
  // Fold the operation again: Swagger UI re-renders every open operation on each change, so each
  // step would cost more than the last.
  await operation.locator('.opblock-summary').first().click();
  await operation.locator('.opblock-body').waitFor({ state: 'detached' });
  return { status, body, url };
}

describe.skipIf(!hasChromium)('the API explorer at /swagger-ui/', () => {
  // Each test answers for the problems of its own steps, not an earlier test's.
  beforeEach(() => {
    problems.length = 0;
  });

  beforeAll(async () => {
    tempDir = mkdtempSync(join(tmpdir(), 'kvb-explorer-'));
    server = await startServer();
    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    page.setDefaultTimeout(15_000);
    const origin = new URL(server.url).origin;
    recordProblems(page, origin, problems);
    page.on('request', (request) => requested.push(request.url()));
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await server?.stop();
    if (!failed && tempDir) rmSync(tempDir, { recursive: true, force: true });
  });

  const METHODS = ['get', 'put', 'post', 'patch', 'delete', 'head', 'options'];

  it('loads offline: no console errors, no failed requests, nothing from another origin', async (context) => {
    screenshotOnFailure(context, 'load');
    const response = await page.goto(`${server.url}/swagger-ui/`, { waitUntil: 'networkidle' });
    expect(response?.status()).toBe(200);
    expect(response?.headers()['content-security-policy']).toMatch(/default-src 'self'/);
    await page.locator('.opblock').first().waitFor();
    // One block per operation of the document the server serves.
    const document = (await (await fetch(`${server.url}/api-docs/openapi.json`)).json()) as { paths: Record<string, object> };
    const operations = Object.values(document.paths).flatMap((item) => Object.keys(item).filter((m) => METHODS.includes(m)));
    expect(operations.length).toBeGreaterThanOrEqual(19);
    await expect.poll(() => page.locator('.opblock').count()).toBe(operations.length);
    await expect(page.locator('.info .title').innerText()).resolves.toMatch(/^kvb/);
    for (const id of ['buckets-createBucket', 'keys-setKey', 'keys-getKey', 'keys-listKeys', 'tokens-mintToken', 'operations-health']) {
      await expect(page.locator(`#operations-${id}`).count(), id).resolves.toBe(1);
    }
    expect(requested.some((url) => url.endsWith('/swagger-ui/static/swagger-ui-bundle.js'))).toBe(true);
    expect(problems).toEqual([]);
  }, 60_000);

  // The timeout guards against a hang only: alone this takes about 15 s, but Swagger UI re-renders
  // in a Chromium that shares two cores with the rest of the suite (over 120 s once in CI).
  it('Try it out: create a bucket, authorize with its secret key, set a key, read it back, mint a token', async (context) => {
    screenshotOnFailure(context, 'try-it-out');

    // Create a bucket: a urlencoded form.
    const create = await tryOut('buckets', 'createBucket');
    await fillFormField(create, 'email', 'explorer@example.com');
    await fillFormField(create, 'secret_key', 'S3cret!');
    await fillFormField(create, 'signing_key', 'signing-key');
    const created = await execute(create);
    expect(created.status, created.body).toBe(201);
    const bucket = created.body;
    expect(bucket).toMatch(/^[0-9a-f-]{36}$/);

    // Authorize with the secret key as the Bearer value.
    await page.locator('.auth-wrapper button.authorize').click();
    const bearerForm = page.locator('.modal-ux .auth-container').filter({ has: page.locator('#auth-bearer-value') });
    await bearerForm.locator('#auth-bearer-value').fill('S3cret!');
    await bearerForm.locator('button[type=submit]').click();
    // Once authorized, the bearer form offers Logout instead of its input.
    await page.locator('.modal-ux .auth-container', { hasText: 'bearer' }).locator('button', { hasText: 'Logout' }).waitFor();
    await page.locator('.modal-ux button.close-modal').click();
    await page.locator('.modal-ux').waitFor({ state: 'detached' });

    // The bucket policy now answers: admin credential accepted.
    const policy = await tryOut('buckets', 'getBucketPolicy');
    await fillParameter(policy, 'bucket', bucket);
    const policyAnswer = await execute(policy);
    expect(policyAnswer.status, policyAnswer.body).toBe(200);
    expect(JSON.parse(policyAnswer.body)).toMatchObject({ has_secret_key: true, has_signing_key: true });

    // Set a key whose name has a slash: it must travel as one percent-encoded segment.
    const set = await tryOut('keys', 'setKey');
    await fillParameter(set, 'bucket', bucket);
    await fillParameter(set, 'key', 'user/42');
    await set.locator('select[aria-label="Request content type"]').selectOption('text/plain');
    await set.locator('textarea.body-param__text').fill('hello from the explorer');
    const setAnswer = await execute(set);
    expect(setAnswer.status, setAnswer.body).toBe(200);
    expect(setAnswer.url).toBe(`${server.url}/api/v1/${bucket}/user%2F42`);
    expect(setAnswer.body).toBe('hello from the explorer');

    // Read it back.
    const get = await tryOut('keys', 'getKey');
    await fillParameter(get, 'bucket', bucket);
    await fillParameter(get, 'key', 'user/42');
    const got = await execute(get);
    expect(got.status, got.body).toBe(200);
    expect(got.body).toBe('hello from the explorer');

    // Raw bytes are sendable too (a file upload), with PUT.
    const put = await tryOut('keys', 'setKeyPut');
    await fillParameter(put, 'bucket', bucket);
    await fillParameter(put, 'key', 'blob');
    await put.locator('select[aria-label="Request content type"]').selectOption('application/octet-stream');
    await put.locator('input[type=file]').setInputFiles({
      name: 'blob.bin',
      mimeType: 'application/octet-stream',
      buffer: Buffer.from([0, 1, 2, 255]),
    });
    expect((await execute(put)).status).toBe(200);
    const blob = await call(`${server.api}/${bucket}/blob`, { token: 'S3cret!' });
    expect(blob.headers.get('kvb-type')).toBe('bytes');
    expect([...blob.body]).toEqual([0, 1, 2, 255]);

    // The counter, with the delta the document suggests (+1).
    const counter = await tryOut('keys', 'addToCounter');
    await fillParameter(counter, 'bucket', bucket);
    await fillParameter(counter, 'key', 'visits');
    const counted = await execute(counter);
    expect(counted.status, counted.body).toBe(200);
    expect(counted.body).toBe('1');

    // Mint a token for user/ (the form is pre-filled from the document's examples).
    const mint = await tryOut('tokens', 'mintToken');
    await fillParameter(mint, 'bucket', bucket);
    await fillFormField(mint, 'prefix', 'user/');
    await fillFormField(mint, 'permissions', 'read,enumerate');
    await fillFormField(mint, 'ttl', '600');
    const minted = await execute(mint);
    expect(minted.status, minted.body).toBe(200);
    const { access_token: token } = JSON.parse(minted.body) as { access_token: string };
    expect(token).toMatch(/^[\w-]+\.[\w-]+\.[\w-]+$/);

    // The minted token really works, within its prefix.
    const withToken = await call(`${server.api}/${bucket}/user%2F42`, { token });
    expect(withToken.text).toBe('hello from the explorer');

    expect(problems).toEqual([]);
  }, 300_000);
});
