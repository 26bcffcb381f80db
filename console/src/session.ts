import type { Connection } from './api.js';

const KEY = 'kvb-console-connection';

/** The connection lives in sessionStorage only: it ends with the tab, and is never in localStorage or a cookie. */
export function savedConnection(): Connection | undefined {
  try {
    const value = JSON.parse(sessionStorage.getItem(KEY) ?? 'null') as Connection | null;
    return value && typeof value.bucket === 'string' && typeof value.credential === 'string' ? value : undefined;
  } catch {
    return undefined;
  }
}

export function saveConnection(c: Connection | undefined): void {
  if (c) sessionStorage.setItem(KEY, JSON.stringify(c));
  else sessionStorage.removeItem(KEY);
}
