// better-sqlite3 installs a prebuilt binary when it can download one (prebuild-install, from
// GitHub); where it cannot, as on CI machines that reach only the npm registry, `npm ci` compiles
// SQLite with node-gyp, about a minute of a run. prebuild-install looks in npm's cache
// (~/.npm/_prebuilds) before it downloads, so after a compile this leaves the binary there, as the
// archive it would have downloaded: the next `npm ci` on this machine unpacks it instead. Same
// package version, Node ABI, platform and architecture, or prebuild-install asks for another
// name and compiles again. The names come from prebuild-install itself.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const require = createRequire(join(process.cwd(), 'node_modules/better-sqlite3/package.json'));
const pkg = require('./package.json');
const opts = { ...require('prebuild-install/rc')(pkg), pkg };
const util = require('prebuild-install/util');
const archive = util.cachedPrebuild(util.getDownloadUrl(opts));
const packageDir = dirname(require.resolve('./package.json'));
const binary = 'build/Release/better_sqlite3.node';

if (existsSync(archive)) {
  console.log(`better-sqlite3 ${pkg.version}: its binary is in npm's cache (${archive})`);
} else if (existsSync(join(packageDir, binary))) {
  mkdirSync(dirname(archive), { recursive: true });
  const partial = `${archive}.${process.pid}.tmp`;
  execFileSync('tar', ['-czf', partial, '-C', packageDir, binary]);
  execFileSync('mv', [partial, archive]);
  console.log(`better-sqlite3 ${pkg.version}: compiled here; the binary is kept in npm's cache for the next install (${archive})`);
} else {
  console.log(`better-sqlite3 ${pkg.version}: no binary to keep (${join(packageDir, binary)} is missing)`);
}
