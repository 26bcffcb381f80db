/**
 * The operations of a transaction body, each with its fields: the one table both the parser
 * (transaction-route.ts) and the documented body schema (transaction-schema.ts) are made from.
 *
 * The parser is the body's only check, and the schema only documents it (the route's `rawBody`):
 * the body is scanned as text so that a value is stored exactly as the client wrote it, which Ajv
 * (working on a parsed object) cannot do without a second parse of up to 16 MiB; and every refusal
 * names its operation by index in the spec's words (`txn[3]: ttl must be an integer`), where
 * Ajv's would read `body/txn/3 must match exactly one schema in oneOf`.
 */
import { MAX_TTL_SECONDS, MAX_TXN_OPS, VALUE_TYPES } from '../../limits.js';

/** What a field holds, and so how the parser reads it and the schema shows it. */
export type TxnField =
  | { kind: 'key'; description: string }
  /** A key prefix: a non-empty string. */
  | { kind: 'prefix'; description: string }
  /** Any JSON value but null. */
  | { kind: 'value'; description: string }
  /** An integer from 0 to `max`. */
  | { kind: 'integer'; max: number; description: string }
  | { kind: 'boolean'; description: string }
  /** One of the value types. */
  | { kind: 'type'; description: string };

interface TxnOperation {
  /** Every field it may have; the first names the operation and holds its key. */
  fields: Readonly<Record<string, TxnField>>;
  required: readonly string[];
  /** Fields of which exactly one must be given. */
  exactlyOne?: readonly string[];
}

const key = (description: string): TxnField => ({ kind: 'key', description });
const seconds = (description: string) => ({ kind: 'integer', max: MAX_TTL_SECONDS, description }) as const;
const revision = (description: string) => ({ kind: 'integer', max: Number.MAX_SAFE_INTEGER, description }) as const;

export const TXN_OPERATIONS = {
  set: {
    fields: {
      set: key('the key'),
      value: { kind: 'value', description: 'any JSON value but null' },
      ttl: seconds('seconds (default: the bucket default_ttl)'),
      type: {
        kind: 'type',
        description:
          'extension: store the value as this type, written as an export line writes it (int64 a decimal string, bytes base64); ' +
          'without it a string is text and any other value JSON',
      },
    },
    required: ['set', 'value'],
  },
  delete: { fields: { delete: key('the key') }, required: ['delete'] },
  get: { fields: { get: key('the key to read') }, required: ['get'] },
  expire: {
    fields: { expire: key('the key (must be live)'), ttl: seconds('seconds from now; 0: never expires') },
    required: ['expire', 'ttl'],
  },
  delete_prefix: {
    fields: { delete_prefix: { kind: 'prefix', description: 'delete every live key with this prefix' } },
    required: ['delete_prefix'],
  },
  check: {
    fields: {
      check: key('the key'),
      rev: revision('the key is live at this revision'),
      exists: { kind: 'boolean', description: 'the key is live (true) or absent/expired (false)' },
      created: revision('the key is live and was created (last became live from absent or expired) at this revision: a fencing token'),
    },
    required: ['check'],
    exactlyOne: ['rev', 'exists', 'created'],
  },
} as const satisfies Record<string, TxnOperation>;

export type TxnOperationName = keyof typeof TXN_OPERATIONS;

/** Each operation's field names, listed once: the parser asks for them for every operation it reads. */
const FIELD_NAMES: Record<string, readonly string[]> = Object.fromEntries(
  Object.entries(TXN_OPERATIONS).map(([name, { fields }]) => [name, Object.keys(fields)]),
);

/** The names of the fields `operation` may have. */
export const txnFieldNames = (operation: TxnOperationName): readonly string[] => FIELD_NAMES[operation]!;

function fieldSchema(field: TxnField): Record<string, unknown> {
  const { description } = field;
  switch (field.kind) {
    case 'key':
      return { type: 'string', description };
    case 'prefix':
      return { type: 'string', minLength: 1, description };
    case 'value':
      return { description };
    case 'integer':
      return { type: 'integer', minimum: 0, maximum: field.max, description };
    case 'boolean':
      return { type: 'boolean', description };
    case 'type':
      return { type: 'string', enum: [...VALUE_TYPES], description };
  }
}

function operationSchema({ fields, required, exactlyOne }: TxnOperation): Record<string, unknown> {
  const properties = Object.fromEntries(Object.entries(fields).map(([name, field]) => [name, fieldSchema(field)]));
  const schema = { type: 'object', properties, required: [...required], additionalProperties: false };
  return exactlyOne ? { ...schema, oneOf: exactlyOne.map((name) => ({ required: [name] })) } : schema;
}

/** The documented `{"txn":[…]}` body, made from the table. */
export const txnBodySchema: Record<string, unknown> = {
  type: 'object',
  properties: {
    txn: {
      type: 'array',
      minItems: 1,
      maxItems: MAX_TXN_OPS,
      items: { oneOf: Object.values(TXN_OPERATIONS).map(operationSchema) },
    },
  },
  required: ['txn'],
  additionalProperties: false,
  examples: [{ txn: [{ set: 'a', value: 1 }, { set: 'b', value: 'text', ttl: 60 }, { delete: 'c' }] }],
};
