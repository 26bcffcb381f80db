/**
 * The bytes the request thread and the SQLite writer thread send each other: a turn's writes and
 * a batch's answers, each encoded into one ArrayBuffer that is transferred, not cloned. A
 * structured clone of the same objects cost 9–19 µs per write (V8 serialises every object
 * generically, and a Buffer with the whole slab behind it); this encoder knows the shapes that
 * cross (plain data: strings, numbers, bigints, booleans, null, undefined, Buffers, arrays, Maps
 * and plain objects) and writes property names as one byte from `NAMES`.
 *
 * Decoded Buffers are views of the received bytes: nothing is copied twice.
 */

/** Each value starts with one of these bytes. */
const Tag = {
  Undefined: 0,
  Null: 1,
  False: 2,
  True: 3,
  Number: 4,
  String: 5,
  BigInt: 6,
  Bytes: 7,
  Array: 8,
  Object: 9,
  Map: 10,
  /** A whole number from 0 to 2^32 - 1 (revisions, counts, lengths): 4 bytes instead of 8. */
  Uint32: 11,
} as const;

/** Inside an object: a property name not in `NAMES` follows as a string. */
const LITERAL_NAME = 254;
/** Inside an object: its last property was the one before. */
const OBJECT_END = 255;

/**
 * Property names of the messages (sqlite-write-protocol.ts, core/write-ops.ts and the answers),
 * each sent as its index. Appending is safe (both threads run the same build); a name missing
 * here still crosses, spelt out.
 */
const NAMES = [
  'kind',
  'bucket',
  'op',
  'key',
  'value',
  'type',
  'data',
  'expiresAt',
  'condition',
  'ifMatch',
  'ifNoneMatch',
  'now',
  'actor',
  'tokenId',
  'address',
  'delta',
  'keepExpiry',
  'ops',
  'expectRevision',
  'operation',
  'listed',
  'at',
  'under',
  'keys',
  'revision',
  'createRevision',
  'refused',
  'current',
  'deleted',
  'results',
  'entry',
  'failed',
  'swept',
  'ok',
  'error',
  'name',
  'message',
  'stack',
  'code',
  'detail',
  'headers',
  'messages',
  'outcomes',
  'touched',
  'clearCache',
  'revisions',
  'rev',
  'exists',
  'created',
  'file',
  'replace',
  'prefix',
  'restoreRevision',
  'batch',
  'before',
  'since',
  'maxBytes',
  'sql',
  'parameters',
  'createdAt',
  'id',
  'email',
  'secretKeyHash',
  'readKeyHash',
  'writeKeyHash',
  'signingKey',
  'signingKeyGeneration',
  'tokenSalt',
  'defaultTtl',
  'stale',
  'carried',
  'watched',
  'from',
  'changes',
] as const;

const NAME_INDEX = new Map<string, number>(NAMES.map((name, i) => [name, i]));

/** Encodes values one after another into one growing buffer; `finish` hands back the bytes. */
export class WireEncoder {
  private bytes = new Uint8Array(4096);
  private view = new DataView(this.bytes.buffer);
  private at = 0;

  /** The bytes written so far as a new ArrayBuffer of their exact length (to transfer), and a fresh start. */
  finish(): ArrayBuffer {
    const out = this.bytes.slice(0, this.at).buffer;
    this.at = 0;
    return out;
  }

  private room(n: number): void {
    if (this.at + n <= this.bytes.length) return;
    const grown = new Uint8Array(Math.max(this.bytes.length * 2, this.at + n));
    grown.set(this.bytes.subarray(0, this.at));
    this.bytes = grown;
    this.view = new DataView(grown.buffer);
  }

  private byte(b: number): void {
    this.room(1);
    this.bytes[this.at++] = b;
  }

  private uint32(n: number): void {
    this.room(4);
    this.view.setUint32(this.at, n);
    this.at += 4;
  }

  private string(s: string): void {
    const n = s.length;
    this.room(4 + 3 * n);
    const start = this.at + 4;
    let i = 0;
    // ASCII (keys, bucket ids, names) by hand: a native call costs more than a short loop.
    for (; i < n; i++) {
      const c = s.charCodeAt(i);
      if (c >= 0x80) break;
      this.bytes[start + i] = c;
    }
    const length = i === n ? n : i + Buffer.from(this.bytes.buffer).write(s.slice(i), start + i, 'utf8');
    this.view.setUint32(this.at, length);
    this.at = start + length;
  }

  value(v: unknown): void {
    switch (typeof v) {
      case 'undefined':
        this.byte(Tag.Undefined);
        break;
      case 'boolean':
        this.byte(v ? Tag.True : Tag.False);
        break;
      case 'number':
        this.number(v);
        break;
      case 'string':
        this.byte(Tag.String);
        this.string(v);
        break;
      case 'bigint':
        this.byte(Tag.BigInt);
        this.string(v.toString());
        break;
      case 'object':
        if (v === null) this.byte(Tag.Null);
        else if (v instanceof Uint8Array) this.bytesOf(v);
        else if (Array.isArray(v)) this.array(v);
        else if (v instanceof Map) this.map(v);
        else this.object(v);
        break;
      default:
        throw new TypeError(`a ${typeof v} cannot be sent to the SQLite writer`);
    }
  }

  private number(n: number): void {
    // -0 is no whole number here: it must come back as -0.
    if (n >>> 0 === n && (n !== 0 || 1 / n > 0)) {
      this.byte(Tag.Uint32);
      this.uint32(n);
    } else {
      this.room(9);
      this.bytes[this.at++] = Tag.Number;
      this.view.setFloat64(this.at, n);
      this.at += 8;
    }
  }

  private bytesOf(data: Uint8Array): void {
    this.byte(Tag.Bytes);
    this.uint32(data.length);
    this.room(data.length);
    this.bytes.set(data, this.at);
    this.at += data.length;
  }

  private array(items: readonly unknown[]): void {
    this.byte(Tag.Array);
    this.uint32(items.length);
    for (let i = 0; i < items.length; i++) this.value(items[i]);
  }

  private map(map: Map<unknown, unknown>): void {
    this.byte(Tag.Map);
    this.uint32(map.size);
    for (const [k, item] of map) {
      this.value(k);
      this.value(item);
    }
  }

  private object(v: object): void {
    this.byte(Tag.Object);
    for (const name in v) {
      const index = NAME_INDEX.get(name);
      if (index === undefined) {
        this.byte(LITERAL_NAME);
        this.string(name);
      } else this.byte(index);
      this.value((v as Record<string, unknown>)[name]);
    }
    this.byte(OBJECT_END);
  }
}

/** Reads values back from bytes a `WireEncoder` wrote, in the order they were written. */
export class WireDecoder {
  private readonly bytes: Uint8Array;
  private readonly view: DataView;
  private readonly buffer: Buffer;
  private at = 0;

  constructor(received: ArrayBuffer) {
    this.bytes = new Uint8Array(received);
    this.view = new DataView(received);
    this.buffer = Buffer.from(received);
  }

  /** Whether every byte has been read. */
  get done(): boolean {
    return this.at >= this.bytes.length;
  }

  private uint32(): number {
    const n = this.view.getUint32(this.at);
    this.at += 4;
    return n;
  }

  private string(): string {
    const length = this.uint32();
    const start = this.at;
    const end = (this.at += length);
    // Short ASCII (keys, bucket ids, kinds) by hand: a native call costs more than a short loop.
    if (length <= 32) {
      let ascii = '';
      for (let i = start; i < end; i++) {
        const c = this.bytes[i]!;
        if (c >= 0x80) return this.buffer.toString('utf8', start, end);
        ascii += String.fromCharCode(c);
      }
      return ascii;
    }
    return this.buffer.toString('utf8', start, end);
  }

  value(): unknown {
    const tag = this.bytes[this.at++];
    switch (tag) {
      case Tag.Undefined:
        return undefined;
      case Tag.Null:
        return null;
      case Tag.False:
        return false;
      case Tag.True:
        return true;
      case Tag.Uint32:
        return this.uint32();
      case Tag.Number: {
        const n = this.view.getFloat64(this.at);
        this.at += 8;
        return n;
      }
      case Tag.String:
        return this.string();
      case Tag.BigInt:
        return BigInt(this.string());
      case Tag.Bytes: {
        const length = this.uint32();
        const start = this.at;
        this.at += length;
        return this.buffer.subarray(start, this.at);
      }
      case Tag.Array: {
        const items = new Array<unknown>(this.uint32());
        for (let i = 0; i < items.length; i++) items[i] = this.value();
        return items;
      }
      case Tag.Map: {
        const map = new Map<unknown, unknown>();
        for (let n = this.uint32(); n > 0; n--) map.set(this.value(), this.value());
        return map;
      }
      case Tag.Object:
        return this.object();
      default:
        throw new Error(`the SQLite writer's message is malformed (tag ${tag} at byte ${this.at - 1})`);
    }
  }

  private object(): Record<string, unknown> {
    const object: Record<string, unknown> = {};
    for (let index = this.bytes[this.at++]!; index !== OBJECT_END; index = this.bytes[this.at++]!) {
      if (index === LITERAL_NAME) {
        // An own property whatever its name (an assignment to "__proto__" would set the prototype).
        Object.defineProperty(object, this.string(), { value: this.value(), enumerable: true, writable: true, configurable: true });
        continue;
      }
      const name = NAMES[index];
      if (name === undefined) throw new Error(`the SQLite writer's message is malformed (name ${index})`);
      object[name] = this.value();
    }
    return object;
  }
}

/** `values` as one transferable ArrayBuffer. */
export function encodeAll(encoder: WireEncoder, values: readonly unknown[]): ArrayBuffer {
  try {
    for (const value of values) encoder.value(value);
  } catch (error) {
    encoder.finish();
    throw error;
  }
  return encoder.finish();
}

/** Every value of `received`, in order. */
export function decodeAll<T>(received: ArrayBuffer): T[] {
  const decoder = new WireDecoder(received);
  const values: T[] = [];
  while (!decoder.done) values.push(decoder.value() as T);
  return values;
}
