import { KvbError, badRequest } from '../errors.js';
import type { Condition, Entry, Refusal } from '../store/store.js';

/** One entity tag of a condition header: its opaque part (between the quotes) and whether it is weak. */
export interface EntityTag {
  weak: boolean;
  opaque: string;
}

/** A key's validator: its revision as a strong entity tag. */
export const etagOf = (revision: number) => `"${revision}"`;

/** The response headers that name a key's revision. */
export const revisionHeaders = (revision: number) => ({ etag: etagOf(revision), 'kvb-revision': String(revision) });

// entity-tag = [ "W/" ] DQUOTE *etagc DQUOTE, etagc = %x21 / %x23-7E / obs-text (RFC 9110 section 8.8.3)
const LIST_ITEM = /[ \t]*(?:(W\/)?"([\x21\x23-\x7e\x80-\xff]*)")?[ \t]*(?:,|$)/y;

/**
 * Parses If-Match / If-None-Match: `*` or a comma-separated list of entity tags (empty list
 * elements allowed, as RFC 9110's list rule says). Anything else is a 400.
 */
export function parseEntityTags(value: string | string[] | undefined, header: string): '*' | EntityTag[] | undefined {
  if (value === undefined) return undefined;
  const text = (Array.isArray(value) ? value.join(',') : value).trim();
  if (text === '*') return '*';
  const tags: EntityTag[] = [];
  let pos = 0;
  while (pos < text.length) {
    LIST_ITEM.lastIndex = pos;
    const match = LIST_ITEM.exec(text);
    if (!match || match[0] === '') throw badRequest(`${header} must be * or a list of entity tags such as "5"`);
    if (match[2] !== undefined) tags.push({ weak: match[1] !== undefined, opaque: match[2] });
    pos = LIST_ITEM.lastIndex;
  }
  if (tags.length === 0) throw badRequest(`${header} must be * or a list of entity tags such as "5"`);
  return tags;
}

/** The revision an entity tag names; undefined for a tag kvb never issues (it matches nothing). */
function revisionOf(tag: EntityTag): number | undefined {
  return /^(0|[1-9][0-9]{0,14})$/.test(tag.opaque) ? Number(tag.opaque) : undefined;
}

const revisions = (tags: EntityTag[]) => tags.map(revisionOf).filter((r): r is number => r !== undefined);

type Headers = Record<string, string | string[] | undefined>;

/**
 * A write's condition from its headers. If-Match compares strongly (a weak tag never satisfies
 * it); If-None-Match weakly. Undefined when the request has neither header.
 */
export function writeCondition(headers: Headers): Condition | undefined {
  const ifMatch = parseEntityTags(headers['if-match'], 'If-Match');
  const ifNoneMatch = parseEntityTags(headers['if-none-match'], 'If-None-Match');
  if (ifMatch === undefined && ifNoneMatch === undefined) return undefined;
  return {
    ...(ifMatch !== undefined && { ifMatch: ifMatch === '*' ? '*' : revisions(ifMatch.filter((t) => !t.weak)) }),
    ...(ifNoneMatch !== undefined && { ifNoneMatch: ifNoneMatch === '*' ? '*' : revisions(ifNoneMatch) }),
  };
}

/** What a GET or HEAD of a live key answers under its conditions: 412 (If-Match fails), 304 (If-None-Match matches) or the value. */
export function readOutcome(headers: Headers, entry: Entry): 'precondition_failed' | 'not_modified' | 'ok' {
  const ifMatch = parseEntityTags(headers['if-match'], 'If-Match');
  if (ifMatch !== undefined && ifMatch !== '*' && !revisions(ifMatch.filter((t) => !t.weak)).includes(entry.revision)) {
    return 'precondition_failed';
  }
  const ifNoneMatch = parseEntityTags(headers['if-none-match'], 'If-None-Match');
  if (ifNoneMatch === '*' || (ifNoneMatch !== undefined && revisions(ifNoneMatch).includes(entry.revision))) return 'not_modified';
  return 'ok';
}

/** The error a refused write answers: 412 with the key's current ETag when it is live, or 404 when the bucket is gone. */
export function refusalError(refusal: Refusal): KvbError {
  if (refusal.refused === 'no_bucket') return new KvbError('not_found', 'no such bucket');
  const { current } = refusal;
  return new KvbError(
    'precondition_failed',
    current ? `the key is at revision ${current.revision}` : 'the key is absent or expired',
    current ? revisionHeaders(current.revision) : undefined,
  );
}
