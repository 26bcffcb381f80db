/**
 * Runs one of kvb's CommonJS bundles (dist/kvb-cli.cjs, dist/kvb-server.cjs) from source plus a V8
 * code cache, so a process starts without parsing and compiling the code it ran last time.
 *
 * The cache is produced lazily, by the first run that finds it missing or rejected, and keyed by the
 * bundle (size and mtime: V8 itself only checks the source length) and the running Node and
 * architecture, and written when a run exits successfully. A cache that cannot be read, written or is
 * rejected only costs the time it would have saved.
 */
import { closeSync, fstatSync, mkdirSync, openSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import type ModuleLoader from 'node:module';
import { homedir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { Script } from 'node:vm';

/**
 * Node's CommonJS loader, reached through this file's own module object (the loader is itself a
 * CommonJS bundle): importing node:module would also load Node's source-map and ES module loader
 * support, a tenth of a `kvb get`'s start-up.
 */
const Module = module.constructor as typeof ModuleLoader;

/** Where caches go: beside the bundle when that is writable, else the user's cache directory. */
function cacheDirs(bundleDir: string): string[] {
  const user = process.env.XDG_CACHE_HOME || join(homedir(), '.cache');
  return [join(bundleDir, '.code-cache'), join(user, 'kvb', 'code-cache')];
}

const pending: Array<() => void> = [];
let lastVariant = 'main';
const loaded = new Map<string, unknown>();
let hooked = false;

/** Writes every pending cache now (at exit); later calls do nothing. */
function flushCaches(): void {
  for (const write of pending.splice(0)) write();
}

function hookFlushPoints(): void {
  if (hooked) return;
  hooked = true;
  // A run that failed (a mistyped command, say) leaves no cache behind for its "command".
  process.once('exit', (code) => {
    if (code === 0) flushCaches();
  });
}

/** A short hash of a string (FNV-1a), for cache file names. */
function hash(text: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return (h >>> 0).toString(36);
}

/**
 * Loads `file` (a CommonJS bundle) and returns its exports. `variant` names what the process is
 * about to do (the CLI passes its command), so `kvb get` and `kvb serve` each get a cache of the
 * code they run rather than sharing the first one written.
 */
export function loadBundle(file: string, variant = lastVariant): unknown {
  if (loaded.has(file)) return loaded.get(file);
  lastVariant = variant;
  const fd = openSync(file, 'r');
  let source: string;
  let key: string;
  try {
    const stat = fstatSync(fd);
    // esbuild writes ASCII (it escapes the rest), which latin1 reads without UTF-8 decoding.
    source = readFileSync(fd, 'latin1');
    // V8 rejects a cache made under other flags: the command line's and NODE_OPTIONS' are in the key.
    const flags = hash(`${process.execArgv.join(' ')}|${process.env.NODE_OPTIONS ?? ''}`);
    key = `${basename(file, '.cjs')}.${variant}-${stat.size}-${Math.trunc(stat.mtimeMs)}-${process.version}-${process.arch}-${flags}.bin`;
  } finally {
    closeSync(fd);
  }
  const dirs = process.env.KVB_CODE_CACHE === 'off' ? [] : cacheDirs(dirname(file));
  let cachedData: Buffer | undefined;
  for (const dir of dirs) {
    try {
      cachedData = readFileSync(join(dir, key));
      break;
    } catch {
      // not cached there
    }
  }
  const script = new Script(Module.wrap(source), { filename: file, ...(cachedData && { cachedData }) });
  if (dirs.length > 0 && (cachedData === undefined || script.cachedDataRejected)) {
    hookFlushPoints();
    pending.push(() => writeCache(script, dirs, key, `${basename(file, '.cjs')}.${variant}-`));
  }
  const module = { exports: {} as unknown, filename: file, id: file };
  const run = script.runInThisContext() as (
    exports: unknown,
    require: NodeJS.Require,
    module: unknown,
    filename: string,
    dirname: string,
  ) => void;
  loaded.set(file, module.exports);
  run.call(module.exports, module.exports, Module.createRequire(file), module, file, dirname(file));
  loaded.set(file, module.exports);
  return module.exports;
}

function writeCache(script: Script, dirs: string[], key: string, prefix: string): void {
  let data: Buffer;
  try {
    data = script.createCachedData();
  } catch {
    return;
  }
  for (const dir of dirs) {
    try {
      mkdirSync(dir, { recursive: true });
      // Written whole, then renamed: a process reading it never sees half a cache.
      const temporary = join(dir, `.${key}.${process.pid}`);
      writeFileSync(temporary, data);
      renameSync(temporary, join(dir, key));
      // Caches of earlier builds of this bundle (for this Node and flags) are dropped.
      const same = key.slice(key.indexOf(`-${process.version}-`));
      for (const other of readdirSync(dir)) {
        if (other !== key && other.startsWith(prefix) && other.endsWith(same)) rmSync(join(dir, other), { force: true });
      }
      return;
    } catch {
      // not writable here: try the next place
    }
  }
}
