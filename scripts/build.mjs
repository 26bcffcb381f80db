// `npm run build`: compiles kvb (tsc), the client package, the console and the bundles, unless
// nothing they are built from changed since the last build. `npm install` builds once (prepare);
// `npm test` then starts from that build instead of spending half a minute making it again.
// `npm run build -- --force` builds all the same.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

/** Everything a build reads: sources, their configs, the build scripts, the dependencies' versions. */
const INPUTS = [
  'src',
  'console',
  'packages/client/package.json',
  'packages/client/tsconfig.json',
  'scripts/build.mjs',
  'scripts/build-console.mjs',
  'scripts/build-bundle.mjs',
  'tsconfig.json',
  'tsconfig.build.json',
  'package.json',
  'package-lock.json',
];
/** What a build makes; a build whose outputs are gone is made again whatever the stamp says. */
const OUTPUTS = [
  'dist/kvb-cli.cjs',
  'dist/kvb-server.cjs',
  'dist/sqlite-writer-worker.cjs',
  'dist/console/app.js',
  'packages/client/dist/client/index.js',
];
const STAMP = 'dist/.build-inputs';

const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const STEPS = [
  [process.execPath, [tsc, '-p', 'tsconfig.build.json']],
  // kvb-client: its JavaScript without comments, its types with them (editors show those; the
  // package would carry every doc comment twice).
  [process.execPath, [tsc, '-p', 'packages/client', '--removeComments', '--declaration', 'false']],
  [process.execPath, [tsc, '-p', 'packages/client', '--emitDeclarationOnly']],
  [process.execPath, ['scripts/build-console.mjs']],
  [process.execPath, ['scripts/build-bundle.mjs']],
];

function files(path) {
  if (!existsSync(path)) return [];
  if (!statSync(path).isDirectory()) return [path];
  return readdirSync(path)
    .sort()
    .flatMap((name) => files(join(path, name)));
}

function inputsHash() {
  const hash = createHash('sha256');
  for (const file of INPUTS.flatMap(files)) hash.update(file).update('\0').update(readFileSync(file)).update('\0');
  return hash.digest('hex');
}

const hash = inputsHash();
const built = existsSync(STAMP) && readFileSync(STAMP, 'utf8') === hash && OUTPUTS.every((file) => existsSync(file));
if (built && !process.argv.includes('--force')) {
  console.log('build: up to date (nothing it is built from changed since the last build; --force builds anyway)');
} else {
  // No stamp while building: a build that fails half-way is never taken for a finished one.
  rmSync(STAMP, { force: true });
  const started = Date.now();
  for (const [command, args] of STEPS) execFileSync(command, args, { stdio: 'inherit' });
  writeFileSync(STAMP, hash);
  console.log(`build: built in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}
