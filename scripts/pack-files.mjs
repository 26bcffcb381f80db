// `prepack` / `postpack` (`node scripts/pack-files.mjs write|restore`): the files the kvb tarball
// carries in place of the checkout's own.
//
// npm-shrinkwrap.json: a copy of package-lock.json without the workspace (packages/client). The
// tarball carries the client's build, not the workspace, so a link to packages/client would point
// an installed kvb at a package it does not hold. `npm ci` in the unpacked tarball installs exactly
// these versions (npm reads a tarball's shrinkwrap only as the root project's lock, not on
// `npm install -g ./kvb-….tgz`: see docs/operations.md).
//
// package.json without `prepare` and `workspaces`: `prepare` builds from src/, which the tarball
// does not hold (its dist/ is built already), and npm lists it as an install script nobody approved;
// the workspace is not in the tarball either. The checkout's own package.json is put back by
// `postpack` (and by the next `prepack`, should a pack have failed in between).
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';

const SAVED = '.package.json.checkout';

if (process.argv[2] === 'restore') {
  if (existsSync(SAVED)) renameSync(SAVED, 'package.json');
  process.exit(0);
}
if (existsSync(SAVED)) renameSync(SAVED, 'package.json');

const lock = JSON.parse(readFileSync('package-lock.json', 'utf8'));
delete lock.packages[''].workspaces;
for (const path of Object.keys(lock.packages)) {
  if (path.startsWith('packages/') || lock.packages[path].link) delete lock.packages[path];
}
writeFileSync('npm-shrinkwrap.json', `${JSON.stringify(lock, null, 2)}\n`);

const source = readFileSync('package.json', 'utf8');
const manifest = JSON.parse(source);
delete manifest.scripts.prepare;
delete manifest.workspaces;
writeFileSync(SAVED, source);
writeFileSync('package.json', `${JSON.stringify(manifest, null, 2)}\n`);
