/** Who may do what: the access matrix of docs/http-api.md as one pure function. */

import { PERMISSIONS, type Permission } from '../limits.js';

export type { Permission };

export type KeyRole = 'admin' | 'read' | 'write';

export type Principal =
  | { kind: 'anonymous' }
  | { kind: 'key'; roles: ReadonlySet<KeyRole> }
  /** expiresAt: the token's `exp` in ms, so a long-lived stream can end at it without asking again. */
  | { kind: 'token'; prefix: string; permissions: ReadonlySet<Permission>; expiresAt?: number; id?: string };

/** Bucket operations that need a permission. */
export type Operation = 'read' | 'enumerate' | 'list_values' | 'write' | 'delete' | 'manage';

export interface PolicyFlags {
  hasSecretKey: boolean;
  hasReadKey: boolean;
  hasWriteKey: boolean;
}

export function anonymousAccess(policy: PolicyFlags): Record<Permission, boolean> {
  return {
    read: !policy.hasReadKey,
    enumerate: !policy.hasReadKey,
    write: !policy.hasWriteKey,
    delete: !policy.hasWriteKey,
  };
}

function anonymousAllows(op: Operation, policy: PolicyFlags): boolean {
  switch (op) {
    case 'read':
    case 'enumerate':
    case 'list_values':
      return !policy.hasReadKey;
    case 'write':
    case 'delete':
      return !policy.hasWriteKey;
    case 'manage':
      return !policy.hasSecretKey;
  }
}

function tokenAllows(op: Operation, permissions: ReadonlySet<Permission>): boolean {
  switch (op) {
    case 'read':
    case 'list_values':
      return permissions.has('read');
    case 'enumerate':
      return permissions.has('enumerate') || permissions.has('read');
    case 'write':
      return permissions.has('write');
    case 'delete':
      return permissions.has('delete');
    case 'manage':
      return false;
  }
}

/**
 * Whether `principal` may perform `op` (on `key`, for key operations). A token is limited to
 * exactly its permissions under its prefix; keys add their role to what anonymous callers may do.
 */
export function allows(principal: Principal, op: Operation, policy: PolicyFlags, key?: string): boolean {
  switch (principal.kind) {
    case 'anonymous':
      return anonymousAllows(op, policy);
    case 'token':
      return tokenAllows(op, principal.permissions) && (key === undefined || key.startsWith(principal.prefix));
    case 'key': {
      const { roles } = principal;
      if (roles.has('admin')) return true;
      if ((op === 'read' || op === 'enumerate' || op === 'list_values') && roles.has('read')) return true;
      if ((op === 'write' || op === 'delete') && roles.has('write')) return true;
      return anonymousAllows(op, policy);
    }
  }
}

/**
 * What a rollback needs over the range it covers. Its answer names every key it changes with its
 * type, size and revision (what a listing with `meta=true` shows), and it sets keys to past values
 * and deletes others: so read (which lists as well), write and delete. A dry run only answers, so
 * it needs read alone. A caller that could not list and read the range cannot learn it, or
 * restore it, through a rollback.
 */
export function rollbackOperations(dryRun: boolean): readonly Operation[] {
  return dryRun ? ['list_values'] : ['list_values', 'write', 'delete'];
}

/** Parses a comma-separated permission list; undefined when empty or when it names an unknown permission. */
export function parsePermissions(values: readonly string[]): Permission[] | undefined {
  const names = values.flatMap((v) => v.split(',')).map((s) => s.trim());
  if (names.length === 0 || names.some((n) => !(PERMISSIONS as readonly string[]).includes(n))) return undefined;
  return [...new Set(names as Permission[])];
}
