import type { CounterInput, CounterOutput, Op, RegisterInput, RegisterOutput } from '../history.js';
import { type Expiry, CLOCK_SLACK_MS, expiryOf } from './expiry.js';

/**
 * The sequential model of one key that the linearizability search runs operations against: a
 * register (text, or absent) and a counter (int64, absent = 0) are one state, so a key that a
 * transaction sets and a counter then adds to is still one history.
 *
 * Revisions are bucket-wide, so for one key the model knows only that each change's revision is
 * greater than the previous change's and equal to what the change answered. A change whose
 * revision nobody saw (an indeterminate write) leaves the revision unknown but bounded below; the
 * first read that reports one fixes it. Keeping the revision in the state is what catches a read
 * that returns the right value at a stale revision (a value written twice, or a lost delete).
 *
 * A key written with a TTL also carries when it expires, as bounds on the history's clock
 * (expiry.ts): whether an operation finds it live or expired is the server's clock's to decide, so
 * the model accepts either only where that clock cannot settle it.
 */
export interface KeyState {
  /** null: absent. A number after a counter add; text otherwise. */
  readonly value: string | number | null;
  /** The revision of the key's last change when `known`; otherwise the smallest it can be. */
  readonly rev: number;
  readonly known: boolean;
  /** When the value expires; absent: never. Only meaningful while `value` is not null. */
  readonly expires?: Expiry;
}

/** Every key starts absent, never changed (a fresh bucket). */
export const initialKeyState: KeyState = { value: null, rev: 0, known: true };

/** Applies one operation at its linearization point: the state after it, or undefined when the operation could not have happened here. */
export type KeyStep = (state: KeyState) => KeyState | undefined;

/** How one operation takes part in the search. */
export interface KeyOperation {
  /** True when it must be linearized (determinate); false when it may be linearized anywhere after its call, or never. */
  readonly must: boolean;
  /** An indeterminate operation bounded by its process's death (`Op.effectBy`): linearized by then, or never. */
  readonly until?: number;
  readonly step: KeyStep;
  /**
   * True when it can only observe (a read, a refused condition): wherever it is accepted it leaves
   * the value as it was, at most learning the revision. A change (even one that may leave an absent
   * key absent, as a transaction's delete does) is never read-only.
   */
  readonly readOnly: boolean;
}

/** The statuses that say a conditional operation was refused because its condition did not hold. */
const CONDITION_REFUSALS: Record<string, readonly number[]> = {
  cas: [409, 412],
  create: [409, 412],
  delete: [404, 409, 412],
};

/**
 * What an operation means to the search, or undefined when it neither changed the key nor tells
 * anything about it (a failed or indeterminate read, a failed blind write, a failed conditional
 * write of a multi-key request, whose refusal may have come from another key's check).
 * `pending` treats an operation as indeterminate (used when a history is cut before its return).
 */
export function keyOperation(op: Op, multiKeyGroups: ReadonlySet<number>, pending = false): KeyOperation | undefined {
  const outcome = pending ? 'unknown' : op.outcome;
  const input = op.input;
  const inMultiKey = op.group !== undefined && multiKeyGroups.has(op.group);
  // Cut off by a prefix (pending), an operation is open-ended there, whatever bounds it later.
  const until = outcome === 'unknown' && !pending ? op.effectBy : undefined;
  const at: Times = { call: op.call, ret: until ?? (pending ? Number.POSITIVE_INFINITY : op.ret) };
  if (input.f === 'read') {
    if (outcome !== 'ok') return undefined;
    return {
      must: true,
      readOnly: true,
      step: op.model === 'counter' ? counterRead(op.output ?? {}, at) : registerRead(op.output ?? {}, at),
    };
  }
  if (outcome === 'fail') {
    if (input.f === 'write' || input.f === 'add' || inMultiKey) return undefined;
    if (op.status !== undefined && !CONDITION_REFUSALS[input.f]?.includes(op.status)) return undefined;
    return { must: true, readOnly: true, step: refused(input, at) };
  }
  const output = outcome === 'ok' ? (op.output ?? {}) : undefined;
  return {
    must: outcome === 'ok',
    ...(until !== undefined && { until }),
    readOnly: false,
    step: change(input, output, inMultiKey && outcome === 'ok', at),
  };
}

/** An operation's call and return (Infinity: indeterminate): the server's clock read it between them. */
interface Times {
  readonly call: number;
  readonly ret: number;
}

/** Whether the key can be live to an operation called at `at.call`: its expiry may still lie ahead of the server's clock. */
function mayBeLive(s: KeyState, at: Times): boolean {
  return s.value !== null && (s.expires === undefined || at.call < s.expires.hi + CLOCK_SLACK_MS);
}

/** Whether the key (not absent) can have expired for an operation that returned at `at.ret`. */
function mayBeExpired(s: KeyState, at: Times): boolean {
  return s.value !== null && s.expires !== undefined && at.ret + CLOCK_SLACK_MS >= s.expires.lo;
}

/** After an operation found the key expired: it expired no later than that operation's return. */
function seenExpired(s: KeyState, at: Times): KeyState {
  const { lo, hi } = s.expires as Expiry;
  const bound = Math.max(lo, Math.min(hi, at.ret));
  return bound === hi ? s : { ...s, expires: { lo, hi: bound } };
}

/** A counter's number: absent is 0, text that is an integer counts as that integer. */
function numberOf(value: string | number | null): number {
  if (value === null) return 0;
  if (typeof value === 'number') return value;
  return /^-?\d+$/.test(value) ? Number(value) : Number.NaN;
}

/** The state after a change to `value` (expiring at `expires`) that answered revision `revision` (undefined: not seen). */
function commit(state: KeyState, value: string | number | null, revision: number | undefined, expires?: Expiry): KeyState | undefined {
  const expiry = value !== null && expires !== undefined ? { expires } : {};
  // Unseen: above a known revision. After an unknown one the bound stays put (it is not raised by
  // one per unseen change): orders of several indeterminate writes then meet in one state, which
  // keeps the search's cache effective, at the cost of missing an off-by-one between them.
  if (revision === undefined) return { value, rev: state.known ? state.rev + 1 : state.rev, known: false, ...expiry };
  // Known or not, the previous revision is at least state.rev, and a later change takes a greater one.
  if (!(revision > state.rev)) return undefined;
  return { value, rev: revision, known: true, ...expiry };
}

/** A read of a live key at `revision`: equal to the known revision, or fixes an unknown one. */
function observe(state: KeyState, revision: number | undefined): KeyState | undefined {
  if (revision === undefined) return state;
  if (state.known) return state.rev === revision ? state : undefined;
  return revision >= state.rev ? { ...state, rev: revision, known: true } : undefined;
}

/** A read of an absent key names no revision (a 404 carries none). */
function absentRevisionFits(state: KeyState, revision: number | undefined): boolean {
  return revision === undefined || revision === 0 || (state.known && revision === state.rev);
}

/** True when the key is live at exactly `rev` (possible, for an unknown revision at least that small). */
function liveAt(state: KeyState, rev: number): boolean {
  if (state.value === null) return false;
  return state.known ? state.rev === rev : rev >= state.rev;
}

/** An absent answer (404, a null get) names no revision; for a key not yet expired to the model it is its expiry. */
function seenAbsent(s: KeyState, revision: number | undefined, at: Times): KeyState | undefined {
  if (s.value === null) return absentRevisionFits(s, revision) ? s : undefined;
  return (revision === undefined || revision === 0) && mayBeExpired(s, at) ? seenExpired(s, at) : undefined;
}

function registerRead(output: RegisterOutput | CounterOutput, at: Times): KeyStep {
  const seen = output.value ?? null;
  const revision = output.revision;
  if (seen === null) return (s) => seenAbsent(s, revision, at);
  const text = String(seen);
  return (s) => (s.value !== null && String(s.value) === text && mayBeLive(s, at) ? observe(s, revision) : undefined);
}

function counterRead(output: RegisterOutput | CounterOutput, at: Times): KeyStep {
  const seen = output.value === undefined || output.value === null ? 0 : numberOf(output.value);
  const revision = output.revision;
  return (s) => {
    if (s.value !== null && mayBeLive(s, at) && numberOf(s.value) === seen) return observe(s, revision);
    return seen === 0 ? seenAbsent(s, revision, at) : undefined;
  };
}

/** A conditional operation refused at its linearization point: the condition did not hold, nothing changed. */
function refused(input: RegisterInput | CounterInput, at: Times): KeyStep {
  switch (input.f) {
    case 'cas': {
      const rev = input.rev;
      // With an unknown revision the key may or may not be at `rev`: a refusal is possible while
      // live. Live at exactly `rev`, only its expiry can have refused it.
      return (s) => {
        if (s.value === null || !s.known || s.rev !== rev) return s;
        return mayBeExpired(s, at) ? seenExpired(s, at) : undefined;
      };
    }
    case 'create':
      return (s) => (mayBeLive(s, at) ? s : undefined);
    case 'delete':
      return (s) => seenAbsent(s, undefined, at);
    default:
      return (s) => s;
  }
}

/**
 * A change that took effect (ok) or may have (indeterminate, `output` undefined). An indeterminate
 * conditional change is only offered where its condition holds: where it fails it changes nothing,
 * which is the same as never linearizing it. `absentDeleteOk`: a transaction's delete of an absent
 * key answered ok and changed nothing.
 */
function change(
  input: RegisterInput | CounterInput,
  output: RegisterOutput | CounterOutput | undefined,
  absentDeleteOk: boolean,
  at: Times,
): KeyStep {
  const revision = output?.revision;
  switch (input.f) {
    case 'write': {
      const value = input.value;
      const expires = expiryOf(input.ttl, (output as RegisterOutput | undefined)?.expiresAt, at);
      return (s) => commit(s, value, revision, expires);
    }
    case 'cas': {
      const { rev, value } = input;
      const expires = expiryOf(input.ttl, (output as RegisterOutput | undefined)?.expiresAt, at);
      return (s) =>
        liveAt(s, rev) && mayBeLive(s, at) ? commit({ value: s.value, rev, known: true }, value, revision, expires) : undefined;
    }
    case 'create': {
      const value = input.value;
      const expires = expiryOf(input.ttl, (output as RegisterOutput | undefined)?.expiresAt, at);
      return (s) => (s.value === null || mayBeExpired(s, at) ? commit(s, value, revision, expires) : undefined);
    }
    case 'delete':
      // A plain DELETE of an expired key is a 404; a transaction's delete of one changes nothing.
      return (s) => {
        if (mayBeLive(s, at)) return commit(s, null, revision);
        return absentDeleteOk ? seenAbsent(s, undefined, at) : undefined;
      };
    case 'add': {
      const delta = input.delta;
      const answered = output?.value;
      return (s) => {
        // An expired counter starts again from the delta, with the bucket's default TTL (none here).
        const live = s.value === null || mayBeLive(s, at);
        const next = (live ? numberOf(s.value) : 0) + delta;
        if (Number.isNaN(next)) return undefined;
        if (answered !== undefined && answered !== null && numberOf(answered) !== next) return undefined;
        return commit(s, next, revision, live ? s.expires : undefined);
      };
    }
    case 'read':
      return (s) => s;
  }
}

/** The memo-cache key of a state. */
export function keyStateId(state: KeyState): string {
  const v = state.value;
  const value = v === null ? 'n' : typeof v === 'number' ? `d${v}` : `s${v}`;
  const expiry = state.expires === undefined ? '' : `@${state.expires.lo}~${state.expires.hi}`;
  return `${state.rev}${state.known ? '=' : '+'}${value}${expiry}`;
}
