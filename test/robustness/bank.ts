import { type Recorder, now } from './recorder.js';
import { type Exchange, describe, outcomeOf, send } from './send.js';
import { type WorkloadContext, sleep } from './workload.js';

/**
 * The bank: a few int64 accounts under `bank/` whose total never changes. Transfers are
 * transactions that check both accounts' revisions and set both new balances; snapshots read every
 * account at one revision, alternately as a transaction of gets and as a listing at `rev=N`. Every
 * snapshot must sum to the total (checked by the bank checker from `bank.reads`).
 */

export const ACCOUNTS = ['bank/0', 'bank/1', 'bank/2', 'bank/3', 'bank/4'];
export const OPENING_BALANCE = 100;
export const BANK_TOTAL = ACCOUNTS.length * OPENING_BALANCE;

const txnBody = (txn: unknown[]) => ({ method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ txn }) });

/** Opens the accounts (one transaction, before any client starts). */
export async function openAccounts(baseUrl: string, bucket: string): Promise<void> {
  const ex = await send(
    `${baseUrl}/api/v1/${bucket}`,
    txnBody(ACCOUNTS.map((key) => ({ set: key, type: 'int64', value: String(OPENING_BALANCE) }))),
  );
  if (ex.answer?.status !== 204) throw new Error(`opening the bank accounts: ${describe(ex)} ${ex.answer?.text ?? ''}`);
}

interface Get {
  value: string;
  rev: number;
}

function gets(ex: Exchange): { revision: number; results: Array<Get | null> } | undefined {
  if (ex.answer?.status !== 200) return undefined;
  return JSON.parse(ex.answer.text) as { revision: number; results: Array<Get | null> };
}

/** One bank client: transfers, and a snapshot every few transfers. */
export async function bankClient(ctx: WorkloadContext, index: number): Promise<void> {
  const { recorder, bucket } = ctx;
  const random = ctx.random.fork();
  const instance = ctx.instances[index % ctx.instances.length]!;
  const base = `${instance.url}/api/v1/${bucket}`;
  /** The revision of the last snapshot of the present, and when it was taken: the bucket was at that revision then. */
  let last: { revision: number; call: number; ret: number } | undefined;
  const minGapMs = ctx.ratePerClient > 0 ? 1000 / ctx.ratePerClient : 0;

  const snapshot = async (r: Recorder) => {
    const call = now();
    if (last && random.chance(0.5)) {
      // A listing of the past: every account as of the revision the last snapshot saw. It is
      // recorded with that snapshot's times, when that revision was the present.
      const ex = await send(`${base}/?prefix=bank/&rev=${last.revision}&values=true&format=json`);
      r.count('bank-history-read', outcomeOf(ex), describe(ex));
      if (ex.answer?.status !== 200) return;
      const balances = Object.fromEntries((JSON.parse(ex.answer.text) as Array<[string, number]>).map(([k, v]) => [k, Number(v)]));
      r.bankReads.push({ revision: last.revision, balances, call: last.call, ret: last.ret });
      return;
    }
    const ex = await send(base, txnBody(ACCOUNTS.map((key) => ({ get: key }))));
    const ret = now();
    r.count('bank-snapshot', outcomeOf(ex), describe(ex));
    const parsed = gets(ex);
    if (!parsed) return;
    const balances: Record<string, number> = {};
    ACCOUNTS.forEach((key, i) => {
      const got = parsed.results[i];
      if (got) balances[key] = Number(got.value);
    });
    last = { revision: parsed.revision, call, ret };
    r.bankReads.push({ revision: parsed.revision, balances, call, ret });
  };

  const transfer = async () => {
    const [from, to] = random.sample(ACCOUNTS, 2) as [string, string];
    const read = await send(base, txnBody([{ get: from }, { get: to }]));
    const parsed = gets(read);
    if (!parsed) {
      recorder.count('bank-read', outcomeOf(read) === 'ok' ? 'fail' : outcomeOf(read), describe(read));
      return false;
    }
    const [a, b] = parsed.results as [Get | null, Get | null];
    if (!a || !b) throw new Error(`bank: an account is missing at revision ${parsed.revision}: ${read.answer!.text.slice(0, 300)}`);
    const amount = Math.min(Number(a.value), random.int(1, 20));
    const ex = await send(
      base,
      txnBody([
        { check: from, rev: a.rev },
        { check: to, rev: b.rev },
        { set: from, type: 'int64', value: String(Number(a.value) - amount) },
        { set: to, type: 'int64', value: String(Number(b.value) + amount) },
      ]),
    );
    const outcome = outcomeOf(ex);
    recorder.count('bank-transfer', outcome, describe(ex));
    return outcome !== 'unknown';
  };

  for (let n = 0; ctx.running(); n++) {
    const started = now();
    let answered = true;
    if (n % 4 === 3) await snapshot(recorder);
    else answered = await transfer();
    const wait = Math.max(answered ? 0 : 150, minGapMs - (now() - started));
    if (wait > 0) await sleep(wait);
  }
}
