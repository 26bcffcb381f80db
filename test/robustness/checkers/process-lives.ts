import type { Op, ProcessLife } from '../history.js';

/**
 * Bounds indeterminate operations by the death of the process that took them, where the store is
 * inside that process (SQLite; `RecordedHistory.lives`): a request sent to an instance whose
 * process was then killed took effect before that process was gone, or never. A kill leaves many
 * requests unanswered; left open-ended, each may take effect at any later moment, and on a hot key
 * a long soak's hundreds of them outgrow the linearizability search. Bounded, each is settled
 * (applied or not) by the kill.
 *
 * Sound only when the request cannot have reached a later process of the instance: the bound is
 * the first exit after the call, and only when no process was spawned between that exit and the
 * moment the client saw the request fail (an HTTP client may send a request it had queued on a
 * new connection, to whichever process listens then).
 */
export function boundByProcessLives(ops: Op[], lives: Record<string, ProcessLife[]> | undefined): Op[] {
  if (lives === undefined) return ops;
  return ops.map((op) => {
    if (op.outcome !== 'unknown' || op.failedAt === undefined) return op;
    const effectBy = lastMomentOf(op.call, op.failedAt, lives[op.instance] ?? []);
    return effectBy === undefined ? op : { ...op, effectBy };
  });
}

function lastMomentOf(call: number, failedAt: number, lives: readonly ProcessLife[]): number | undefined {
  const exit = lives.find((life) => life.exited !== undefined && life.exited >= call)?.exited;
  if (exit === undefined) return undefined;
  const respawned = lives.some((life) => life.started >= exit && life.started <= failedAt);
  return respawned ? undefined : exit;
}
