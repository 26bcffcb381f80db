import { Counter, Gauge, type Registry } from 'prom-client';
import type { VerificationScheduler } from '../auth/verification-scheduler.js';

/** The slow-hash queue (auth/verification-scheduler.ts), read when scraped. */
export function registerVerificationMetrics(registry: Registry, verifications: VerificationScheduler): void {
  const gauge = (name: string, help: string, read: () => number) =>
    new Gauge({
      name,
      help,
      registers: [registry],
      collect() {
        this.set(read());
      },
    });
  gauge('kvb_credential_verifications_running', 'Credential verifications (slow hashes) running now', () => verifications.stats().running);
  gauge('kvb_credential_verifications_waiting', 'Credential verifications waiting for their turn', () => verifications.stats().waiting);
  gauge(
    'kvb_credential_verification_seconds',
    'Estimated duration of one credential verification (recent average)',
    () => verifications.stats().costMs / 1000,
  );
  let exported = 0;
  new Counter({
    name: 'kvb_credential_verifications_refused_total',
    help: 'Credential verifications refused with 429 because they would have waited too long',
    registers: [registry],
    collect() {
      const now = verifications.stats().refused;
      this.inc(now - exported);
      exported = now;
    },
  });
}
