import { Counter, Gauge, type Registry } from 'prom-client';
import { verificationStats } from './access-control.js';

/** The slow-hash queue (auth/verification-scheduler.ts), read when scraped. */
export function registerVerificationMetrics(registry: Registry): void {
  const gauge = (name: string, help: string, read: () => number) =>
    new Gauge({ name, help, registers: [registry], collect() { this.set(read()); } });
  gauge('kvb_credential_verifications_running', 'Credential verifications (slow hashes) running now', () => verificationStats().running);
  gauge('kvb_credential_verifications_waiting', 'Credential verifications waiting for their turn', () => verificationStats().waiting);
  gauge('kvb_credential_verification_seconds', 'Estimated duration of one credential verification (recent average)', () => verificationStats().costMs / 1000);
  let exported = 0;
  new Counter({
    name: 'kvb_credential_verifications_refused_total',
    help: 'Credential verifications refused with 429 because they would have waited too long',
    registers: [registry],
    collect() {
      const now = verificationStats().refused;
      if (now < exported) exported = 0; // a new scheduler (configureVerifications) starts from 0
      this.inc(now - exported);
      exported = now;
    },
  });
}
