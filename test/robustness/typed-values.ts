import { createHash, randomBytes } from 'node:crypto';
import { MAX_KEY_BYTES, MAX_VALUE_BYTES, type ValueType } from '../../src/limits.js';
import { type ClientKit, bucketUrl, clientKit, jsonBody, keyUrl, pacedLoop } from './client-kit.js';
import type { Answer } from './send.js';
import { revisionOf } from './send.js';
import type { WorkloadContext } from './workload.js';

/**
 * Values of every type: clients that write `v/` keys as JSON, float64, bytes (some not UTF-8) and
 * text, values of exactly the size limit and one byte over it (refused, writing nothing), through
 * a PUT and through a transaction's typed set (bytes as base64, float64 as a JSON number), on a
 * key of exactly the key limit too; and read them back by GET (the exact bytes and `Kvb-Type`) and
 * by a transaction's gets (the JSON wire form). The register model compares a value's *name*: its
 * type, length and a digest of its bytes (`typedName`), so a read that returns another type, or
 * the same type with one byte changed, reads a value nobody wrote.
 */
export const TYPED_PREFIX = 'v/';
/** A key of exactly MAX_KEY_BYTES bytes of UTF-8 (two-byte characters, so a byte count that is off shows). */
const LONG_KEY = (() => {
  const head = `${TYPED_PREFIX}long/`;
  const room = MAX_KEY_BYTES - Buffer.byteLength(head);
  return head + 'é'.repeat(Math.floor(room / 2)) + 'x'.repeat(room % 2);
})();
export const TYPED_KEYS = [`${TYPED_PREFIX}0`, `${TYPED_PREFIX}1`, LONG_KEY];

/** What the model compares: a value's type and its exact bytes (length and digest). */
export function typedName(type: string, bytes: Buffer): string {
  return `${type}:${bytes.length}:${createHash('sha256').update(bytes).digest('hex').slice(0, 24)}`;
}

/** A float64's bytes for naming: its number (the server writes its own shortest form; the number is what must survive). */
const floatBytes = (n: number) => Buffer.from(String(n));

/** The name of a value as a GET answers it: `Kvb-Type` and the body's bytes. */
export function nameOfRead(answer: Answer): string {
  const type = String(answer.headers['kvb-type']);
  const bytes = answer.bytes ?? Buffer.from(answer.text);
  return typedName(type, type === 'float64' ? floatBytes(Number(bytes.toString())) : bytes);
}

/**
 * The name of a value in its JSON wire form (a transaction's get, a watch event with values): text
 * a JSON string, json itself, int64 a decimal string, float64 a number, bytes base64.
 */
export function nameOfWire(type: string, value: unknown): string {
  switch (type) {
    case 'json':
      return typedName(type, Buffer.from(JSON.stringify(value)));
    case 'float64':
      return typedName(type, floatBytes(Number(value)));
    case 'bytes':
      return typedName(type, Buffer.from(String(value), 'base64'));
    default:
      return typedName(type, Buffer.from(String(value)));
  }
}

interface Made {
  type: ValueType;
  bytes: Buffer;
  /** How it is sent: a PUT with this Content-Type (none: the server infers), or a transaction's typed set. */
  via: { put: string | undefined } | { txn: unknown };
}

/** One new value of a random kind; `over` makes it one byte past the value limit. */
function makeValue(kit: ClientKit, n: number, over: boolean): Made {
  const tag = `${kit.client}.${n}`;
  const roll = kit.random.int(0, 6);
  if (over) return { type: 'bytes', bytes: randomBytes(MAX_VALUE_BYTES + 1), via: { put: 'application/octet-stream' } };
  switch (roll) {
    case 0: {
      const text = JSON.stringify({ w: tag, list: [n, 'é☃', null], nested: { ok: true } });
      return { type: 'json', bytes: Buffer.from(text), via: { put: 'application/json' } };
    }
    case 1: {
      // A fraction or an exponent: float64 by inference, never int64.
      const x = kit.random.chance(0.5) ? kit.client * 100_000 + n + 0.25 : (n + 1) * 1.1e-7;
      return { type: 'float64', bytes: floatBytes(x), via: { put: undefined } };
    }
    case 2: {
      const x = -(kit.client * 100_000 + n) - 0.75;
      return { type: 'float64', bytes: floatBytes(x), via: { txn: x } };
    }
    case 3: {
      // Not UTF-8 (0xff), with a NUL: only application/octet-stream or inference can store it.
      const bytes = Buffer.concat([Buffer.from([0xff, 0xfe, 0x00]), Buffer.from(`b${tag}`), randomBytes(kit.random.int(0, 64))]);
      return {
        type: 'bytes',
        bytes,
        via: kit.random.chance(0.5) ? { put: 'application/octet-stream' } : { txn: bytes.toString('base64') },
      };
    }
    case 4: {
      // Exactly the limit, of text ending in three-byte characters.
      const head = Buffer.from(`t${tag}:`);
      const fill = Math.floor((MAX_VALUE_BYTES - head.length) / 3);
      const text = `${head.toString()}${'€'.repeat(fill)}${'.'.repeat(MAX_VALUE_BYTES - head.length - fill * 3)}`;
      return { type: 'text', bytes: Buffer.from(text), via: { put: 'text/plain; charset=utf-8' } };
    }
    case 5: {
      const bytes = Buffer.concat([Buffer.from(`B${tag}:`), randomBytes(MAX_VALUE_BYTES)]).subarray(0, MAX_VALUE_BYTES);
      return { type: 'bytes', bytes, via: { put: 'application/octet-stream' } };
    }
    default:
      return { type: 'text', bytes: Buffer.from(`s${tag} ünïcødé`), via: { put: 'text/plain' } };
  }
}

export async function typedValueClient(ctx: WorkloadContext, index: number, errors: string[]): Promise<void> {
  const state = { unanswered: false };
  const kit = clientKit(ctx, index, state);
  const { random, instance } = kit;
  let n = 0;

  const write = async (key: string) => {
    const over = random.chance(0.05);
    const made = makeValue(kit, n++, over);
    const value = typedName(made.type, made.bytes);
    const isTxn = 'txn' in made.via;
    const init =
      'txn' in made.via
        ? { method: 'POST', ...jsonBody({ txn: [{ set: key, value: made.via.txn, type: made.type }] }) }
        : { method: 'PUT', headers: made.via.put ? { 'content-type': made.via.put } : ({} as Record<string, string>), body: made.bytes };
    const url = isTxn ? bucketUrl(instance, ctx.bucket) : keyUrl(instance, ctx.bucket, key);
    await kit.exchange(over ? 'value-over-limit' : `value-${made.type}`, url, init, (ex, ok) => {
      if (over && ok) errors.push(`a value of ${made.bytes.length} bytes (over the ${MAX_VALUE_BYTES}-byte limit) was stored in ${key}`);
      const revision = ok ? revisionOf(ex.answer!) : undefined;
      return [{ model: 'register', key, input: { f: 'write', value }, output: { ...(revision !== undefined && { revision }) } }];
    });
  };

  await pacedLoop(ctx, random, state, async () => {
    const key = random.pick(TYPED_KEYS);
    const roll = random.next();
    if (roll < 0.45) await write(key);
    else if (roll < 0.8) await readTyped(ctx, kit, key);
    else await multiReadTyped(ctx, kit);
  });
}

/** A GET of a typed key: its exact bytes and type, or absent. */
export async function readTyped(ctx: WorkloadContext, kit: ClientKit, key: string): Promise<void> {
  await kit.exchange(
    'value-read',
    keyUrl(kit.instance, ctx.bucket, key),
    { binary: true },
    (ex) => {
      const found = ex.answer?.status === 200;
      const revision = found ? revisionOf(ex.answer!) : undefined;
      const value = found ? nameOfRead(ex.answer!) : null;
      return [{ model: 'register', key, input: { f: 'read' }, output: { value, ...(revision !== undefined && { revision }) } }];
    },
    [404],
  );
}

/** Gets of every typed key in one transaction: values in their JSON wire form. */
async function multiReadTyped(ctx: WorkloadContext, kit: ClientKit): Promise<void> {
  await kit.exchange(
    'value-txn-read',
    bucketUrl(kit.instance, ctx.bucket),
    { method: 'POST', ...jsonBody({ txn: TYPED_KEYS.map((key) => ({ get: key })) }) },
    (ex, ok) => {
      const results = ok
        ? (JSON.parse(ex.answer!.text) as { results: Array<{ type: string; value: unknown; rev: number } | null> }).results
        : [];
      return TYPED_KEYS.map((key, i) => {
        const got = results[i];
        return {
          model: 'register' as const,
          key,
          input: { f: 'read' as const },
          output: got ? { value: nameOfWire(got.type, got.value), revision: got.rev } : { value: null },
        };
      });
    },
  );
}
