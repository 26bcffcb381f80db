// `prepack`: npm-shrinkwrap.json for the kvb tarball, a copy of package-lock.json without the
// workspace (packages/client). The tarball carries the client's build, not the workspace, so a
// link to packages/client would point an installed kvb at a package it does not hold.
import { readFileSync, writeFileSync } from 'node:fs';

const lock = JSON.parse(readFileSync('package-lock.json', 'utf8'));
delete lock.packages[''].workspaces;
for (const path of Object.keys(lock.packages)) {
  if (path.startsWith('packages/') || lock.packages[path].link) delete lock.packages[path];
}
writeFileSync('npm-shrinkwrap.json', `${JSON.stringify(lock, null, 2)}\n`);
