import { performance } from 'node:perf_hooks';
import type {
  BankRead,
  CounterInput,
  CounterOutput,
  FencedWrite,
  Op,
  Outcome,
  RecordedHistory,
  RegisterInput,
  RegisterOutput,
  WatchLog,
} from './history.js';
import type { CredentialHistory } from './history-credentials.js';

/** The one clock of a run: every call, return and event time comes from it. */
export const now = (): number => performance.now();

/** A server's wall-clock time (ms since the epoch, as `Kvb-Expires-At` or a token's `exp` says) on the run's clock, converted as it is received. */
export const fromWall = (wallMs: number): number => wallMs - (Date.now() - performance.now());

type OpDraft =
  | { model: 'register'; key: string; input: RegisterInput; output?: RegisterOutput }
  | { model: 'counter'; key: string; input: CounterInput; output?: CounterOutput };

/**
 * Collects what every client of one scenario saw, in the shape of RecordedHistory, and tallies
 * operations by kind and outcome for the run's summary.
 */
export class Recorder {
  readonly ops: Op[] = [];
  readonly watches: WatchLog[] = [];
  readonly bankReads: BankRead[] = [];
  readonly fenced: FencedWrite[] = [];
  /** Set by the temporary-token workload; `expiry` by runs with expiring keys (RecordedHistory's fields of those names). */
  credentials?: CredentialHistory;
  expiry?: RecordedHistory['expiry'];
  /** `kind outcome` -> count, e.g. `cas fail` -> 31. Requests, not per-key ops. */
  readonly tally = new Map<string, number>();
  /** Why requests were not ok, e.g. `412`, `503`, `UND_ERR_HEADERS_TIMEOUT`. */
  readonly reasons = new Map<string, number>();
  private nextId = 0;
  private nextGroup = 0;
  private nextClient = 0;

  constructor(readonly scenario: string) {}

  newClient(): number {
    return this.nextClient++;
  }

  count(kind: string, outcome: Outcome, reason?: string): void {
    const k = `${kind} ${outcome}`;
    this.tally.set(k, (this.tally.get(k) ?? 0) + 1);
    if (reason && outcome !== 'ok') this.reasons.set(reason, (this.reasons.get(reason) ?? 0) + 1);
  }

  /**
   * Records one request that touched `drafts.length` keys: one Op per key, sharing a group when
   * there are several, with the same times and outcome. An unknown outcome gets `ret: Infinity`.
   */
  record(client: number, instance: string, call: number, ret: number, outcome: Outcome, drafts: OpDraft[], status?: number): void {
    const group = drafts.length > 1 ? this.nextGroup++ : undefined;
    for (const draft of drafts) {
      const op = {
        id: this.nextId++,
        client,
        instance,
        model: draft.model,
        key: draft.key,
        input: draft.input,
        call,
        ret: outcome === 'unknown' ? Infinity : ret,
        outcome,
        ...(outcome === 'unknown' && Number.isFinite(ret) && { failedAt: ret }),
        ...(outcome === 'ok' && draft.output !== undefined && { output: draft.output }),
        ...(group !== undefined && { group }),
        ...(status !== undefined && { status }),
      } as Op;
      this.ops.push(op);
    }
  }

  history(bank?: { total: number; accounts: string[]; nonNegative?: boolean }): RecordedHistory {
    return {
      scenario: this.scenario,
      ops: this.ops,
      watches: this.watches,
      ...(bank && { bank: { reads: this.bankReads, ...bank } }),
      ...(this.fenced.length > 0 && { fenced: this.fenced }),
      ...(this.credentials && { credentials: this.credentials }),
      ...(this.expiry && { expiry: this.expiry }),
    };
  }
}
