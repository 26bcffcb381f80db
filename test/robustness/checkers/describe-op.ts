import type { Op } from '../history.js';

/** One operation on one line for a verdict's details: `#12 c3@a cas("k" if rev 4 := "v9") -> ok rev 7 [101.2, 140.9]`. */
export function describeOp(op: Op): string {
  const input = op.input;
  let what: string;
  switch (input.f) {
    case 'read':
      what = `read(${JSON.stringify(op.key)})`;
      break;
    case 'write':
      what = `write(${JSON.stringify(op.key)} := ${JSON.stringify(input.value)})`;
      break;
    case 'cas':
      what = `cas(${JSON.stringify(op.key)} if rev ${input.rev} := ${JSON.stringify(input.value)})`;
      break;
    case 'create':
      what = `create(${JSON.stringify(op.key)} := ${JSON.stringify(input.value)})`;
      break;
    case 'delete':
      what = `delete(${JSON.stringify(op.key)})`;
      break;
    case 'add':
      what = `add(${JSON.stringify(op.key)} ${input.delta >= 0 ? '+' : ''}${input.delta})`;
      break;
  }
  let answer: string = op.outcome;
  if (op.outcome === 'ok' && op.output) {
    const parts: string[] = [];
    if (input.f === 'read' || input.f === 'add') parts.push(op.output.value == null ? 'absent' : JSON.stringify(op.output.value));
    if (op.output.revision !== undefined) parts.push(`rev ${op.output.revision}`);
    if (parts.length > 0) answer = `ok ${parts.join(' ')}`;
  } else if (op.status !== undefined) {
    answer = `${op.outcome} ${op.status}`;
  }
  const group = op.group === undefined ? '' : ` group ${op.group}`;
  return `#${op.id} c${op.client}@${op.instance} ${what} -> ${answer}${group} [${time(op.call)}, ${time(op.ret)}]`;
}

function time(t: number): string {
  return Number.isFinite(t) ? t.toFixed(1) : '∞';
}
