import { describe, expect, it } from 'vitest';
import { type Principal, allows, anonymousAccess, parsePermissions, rollbackOperations } from '../../src/auth/access.js';

const none = { hasSecretKey: false, hasReadKey: false, hasWriteKey: false };
const locked = { hasSecretKey: true, hasReadKey: true, hasWriteKey: true };
const anonymous: Principal = { kind: 'anonymous' };
const key = (...roles: Array<'admin' | 'read' | 'write'>): Principal => ({ kind: 'key', roles: new Set(roles) });
const token = (prefix: string, ...permissions: Array<'read' | 'write' | 'enumerate' | 'delete'>): Principal => ({
  kind: 'token',
  prefix,
  permissions: new Set(permissions),
});

describe('access matrix', () => {
  it('a bucket without credentials is fully public, management included', () => {
    for (const op of ['read', 'enumerate', 'list_values', 'write', 'delete', 'manage'] as const) {
      expect(allows(anonymous, op, none)).toBe(true);
    }
  });
  it('read_key guards reads and listing; write_key guards writes and deletes', () => {
    const readLocked = { ...none, hasReadKey: true };
    expect(allows(anonymous, 'read', readLocked)).toBe(false);
    expect(allows(anonymous, 'write', readLocked)).toBe(true);
    const writeLocked = { ...none, hasWriteKey: true };
    expect(allows(anonymous, 'delete', writeLocked)).toBe(false);
    expect(allows(anonymous, 'read', writeLocked)).toBe(true);
  });
  it('write_key cannot read when a read_key is set, and read_key cannot write when a write_key is set', () => {
    expect(allows(key('write'), 'read', locked)).toBe(false);
    expect(allows(key('read'), 'write', locked)).toBe(false);
    expect(allows(key('read'), 'list_values', locked)).toBe(true);
    expect(allows(key('write'), 'delete', locked)).toBe(true);
  });
  it('only the secret key manages a bucket that has one', () => {
    expect(allows(key('read', 'write'), 'manage', locked)).toBe(false);
    expect(allows(key('admin'), 'manage', locked)).toBe(true);
  });
  it('a token gets exactly its permissions under its prefix', () => {
    const t = token('user/', 'read');
    expect(allows(t, 'read', none, 'user/1')).toBe(true);
    expect(allows(t, 'read', none, 'other')).toBe(false);
    expect(allows(t, 'write', none, 'user/1')).toBe(false); // not even what anonymous callers may do
    expect(allows(t, 'enumerate', none)).toBe(true);
    expect(allows(token('user/', 'enumerate'), 'list_values', none)).toBe(false);
    expect(allows(t, 'manage', none)).toBe(false);
  });
  it('anonymous_access reports the anonymous column', () => {
    expect(anonymousAccess({ ...none, hasReadKey: true })).toEqual({ read: false, enumerate: false, write: true, delete: true });
  });
  it('parses permission lists', () => {
    expect(parsePermissions(['read,write', 'delete'])).toEqual(['read', 'write', 'delete']);
    expect(parsePermissions(['read,admin'])).toBeUndefined();
    expect(parsePermissions([''])).toBeUndefined();
    expect(parsePermissions([])).toBeUndefined();
  });
});

describe('rollback: needs what its answer reveals (a listing with meta) and what it does (write, delete)', () => {
  const mayRollBack = (p: Principal, policy: typeof none, dryRun = false) =>
    rollbackOperations(dryRun).every((op) => allows(p, op, policy, 'a/'));
  it('the write key only where reads are public; a token only with read, write and delete', () => {
    expect(mayRollBack(key('write'), locked)).toBe(false);
    expect(mayRollBack(key('write'), { ...locked, hasReadKey: false })).toBe(true);
    expect(mayRollBack(key('read'), locked)).toBe(false);
    expect(mayRollBack(key('admin'), locked)).toBe(true);
    expect(mayRollBack(token('a/', 'write', 'delete'), none)).toBe(false);
    expect(mayRollBack(token('a/', 'enumerate', 'write', 'delete'), none)).toBe(false);
    expect(mayRollBack(token('a/', 'read', 'write', 'delete'), none)).toBe(true);
  });
  it('a dry run needs read only', () => {
    expect(mayRollBack(key('read'), locked, true)).toBe(true);
    expect(mayRollBack(key('write'), locked, true)).toBe(false);
    expect(mayRollBack(token('a/', 'read'), none, true)).toBe(true);
  });
});
