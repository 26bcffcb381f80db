import type { BankRead, RecordedHistory, Verdict } from '../history.js';

/**
 * The bank workload's invariants (Jepsen's bank test): transfers move money between accounts in
 * transactions, so a snapshot of every account read at one revision must
 * - name every account and sum to the fixed total (a torn transaction shows as a wrong sum);
 * - have no negative balance when the workload's transfers check the balance they take from;
 * - agree exactly with every other snapshot at the same revision (one revision, one state);
 * - not go back in time: a snapshot that began after another was answered has a revision at
 *   least as new (etcd's robustness/validate holds reads to the same real-time order).
 */
const CHECKER = 'bank';
const MAX_DETAILS = 10;

function describeRead(read: BankRead, index: number): string {
  return `snapshot ${index} at rev ${read.revision} [${read.call.toFixed(1)}, ${read.ret.toFixed(1)}]`;
}

export function checkBank(bank: NonNullable<RecordedHistory['bank']>): Verdict {
  const details: string[] = [];
  const note = (line: string): void => {
    if (details.length < MAX_DETAILS) details.push(line);
    else if (details.length === MAX_DETAILS) details.push('… more');
  };
  const atRevision = new Map<number, { read: BankRead; index: number }>();
  bank.reads.forEach((read, index) => {
    const missing = bank.accounts.filter((account) => typeof read.balances[account] !== 'number');
    if (missing.length > 0) note(`${describeRead(read, index)} lacks accounts ${missing.join(', ')}`);
    const sum = bank.accounts.reduce((total, account) => total + (read.balances[account] ?? 0), 0);
    if (sum !== bank.total) note(`${describeRead(read, index)} sums to ${sum}, not ${bank.total}: ${JSON.stringify(read.balances)}`);
    if (bank.nonNegative) {
      const negative = bank.accounts.filter((account) => (read.balances[account] ?? 0) < 0);
      if (negative.length > 0)
        note(`${describeRead(read, index)} has negative balances: ${negative.map((a) => `${a}=${read.balances[a]}`).join(', ')}`);
    }
    const same = atRevision.get(read.revision);
    if (same === undefined) atRevision.set(read.revision, { read, index });
    else {
      const differ = bank.accounts.filter((account) => same.read.balances[account] !== read.balances[account]);
      if (differ.length > 0) {
        note(
          `${describeRead(same.read, same.index)} and ${describeRead(read, index)} disagree on ${differ.map((a) => `${a} (${same.read.balances[a]} vs ${read.balances[a]})`).join(', ')}`,
        );
      }
    }
  });
  const indexed = bank.reads.map((read, index) => ({ read, index }));
  const byReturn = [...indexed].sort((a, b) => a.read.ret - b.read.ret);
  let cursor = 0;
  let newest: { read: BankRead; index: number } | undefined;
  for (const current of [...indexed].sort((a, b) => a.read.call - b.read.call)) {
    while (cursor < byReturn.length && (byReturn[cursor] as { read: BankRead }).read.ret < current.read.call) {
      const done = byReturn[cursor++] as { read: BankRead; index: number };
      if (newest === undefined || done.read.revision > newest.read.revision) newest = done;
    }
    if (newest !== undefined && newest.read.revision > current.read.revision) {
      note(
        `${describeRead(current.read, current.index)} went back in time: ${describeRead(newest.read, newest.index)} was answered before it began`,
      );
    }
  }
  return { checker: CHECKER, result: details.length > 0 ? 'anomaly' : 'ok', details, examined: bank.reads.length };
}
