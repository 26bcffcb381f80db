import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { type Browser, type Page, chromium } from 'playwright-core';
import { expect } from 'vitest';

// What the callbacks given to page.evaluate use: they run in the page, where these exist.
declare const window: object;
declare const document: object;

const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

/** Debian's Chromium (`apt-get install chromium`; .ci/run installs it). */
export const CHROMIUM = '/usr/bin/chromium';

/** Whether the browser tests can run; says why a file is skipped when they cannot. */
export function chromiumPresent(file: string): boolean {
  const present = existsSync(CHROMIUM);
  if (!present) console.warn(`${file} skipped: ${CHROMIUM} is missing (apt-get install chromium; .ci/run installs it)`);
  return present;
}

/**
 * Headless Chromium. Without the background-networking flags it keeps dialling Google's hosts,
 * which this machine's closed network refuses, many at a time.
 */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--no-first-run',
      '--disable-quic',
      '--disable-sync',
    ],
  });
}

export interface ProblemRules {
  /** Console errors that are not problems (Chromium repeats every failed response as one). */
  ignoreConsole?: RegExp;
  /** Failed requests that are not problems (an aborted stream, a saved download). */
  ignoreFailure?: (url: string, error: string) => boolean;
  /** Answers of 400 and above the current step expects. */
  expectedFailures?: () => RegExp[];
}

/**
 * Records everything that goes wrong in a page into `problems`: console errors, page errors,
 * failed requests, requests to any origin but the server's (the page must work offline), and
 * answers of 400 and above.
 */
export function recordProblems(page: Page, origin: string, problems: string[], rules: ProblemRules = {}): void {
  page.on('console', (message) => {
    if (message.type() !== 'error' || rules.ignoreConsole?.test(message.text())) return;
    problems.push(`console error: ${message.text()}`);
  });
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  page.on('requestfailed', (request) => {
    const error = request.failure()?.errorText ?? '';
    if (!rules.ignoreFailure?.(request.url(), error)) problems.push(`request failed: ${request.url()} ${error}`);
  });
  page.on('request', (request) => {
    const url = new URL(request.url());
    if (url.protocol !== 'blob:' && url.origin !== origin) problems.push(`request to another origin: ${request.url()}`);
  });
  page.on('response', (response) => {
    if (response.status() < 400) return;
    const what = `HTTP ${response.status()} for ${response.request().method()} ${response.url()}`;
    if (!(rules.expectedFailures?.() ?? []).some((pattern) => pattern.test(what))) problems.push(what);
  });
}

/** axe-core on the page as it is now: no violations of the given impacts (serious or critical by default). */
export async function expectAccessible(p: Page, screen: string, impacts = ['serious', 'critical']): Promise<void> {
  // Evaluated through the DevTools protocol, which the page's CSP does not govern (it would block an inline script).
  if (!(await p.evaluate(() => 'axe' in window))) await p.evaluate(AXE_SOURCE);
  const violations = await p.evaluate(async (counted) => {
    const axe = (
      window as unknown as {
        axe: {
          run: (
            context: object,
            options: object,
          ) => Promise<{ violations: Array<{ id: string; impact: string; help: string; nodes: Array<{ target: unknown }> }> }>;
        };
      }
    ).axe;
    const result = await axe.run(document, { resultTypes: ['violations'] });
    return result.violations
      .filter((v) => counted.includes(v.impact))
      .map((v) => ({ id: v.id, help: v.help, nodes: v.nodes.slice(0, 5).map((n) => JSON.stringify(n.target)) }));
  }, impacts);
  expect(violations, `axe violations on the ${screen} screen`).toEqual([]);
}
