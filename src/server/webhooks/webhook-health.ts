/** Webhooks past this many seconds of changes waiting are named in /health. */
export const WEBHOOK_LAG_HEALTH_SECONDS = 60;

/** What /health adds while webhooks lag: how many, and the longest wait (seconds). */
export interface WebhookLagDetail {
  lagging: number;
  max_lag_seconds: number;
}

/**
 * Where /health asks about webhook lag. The app is built before the delivery loop starts (it runs
 * beside the sweeper), so the app holds this and `kvb serve` plugs the loop into it.
 */
export interface WebhookHealth {
  lag: () => WebhookLagDetail | undefined;
}

/** The lag detail from each webhook's waiting-since time (ms); undefined while none waits past the threshold. */
export function lagDetail(pendingSince: Iterable<number | null>, now: number, thresholdSeconds = WEBHOOK_LAG_HEALTH_SECONDS) {
  let lagging = 0;
  let max = 0;
  for (const since of pendingSince) {
    if (since === null) continue;
    const seconds = (now - since) / 1000;
    if (seconds <= thresholdSeconds) continue;
    lagging++;
    max = Math.max(max, seconds);
  }
  return lagging === 0 ? undefined : { lagging, max_lag_seconds: Math.round(max) };
}
