// Bundles the web console (console/) into dist/console/: one script, one stylesheet, the page and its icon.
import { build } from 'esbuild';
import { copyFileSync, mkdirSync, rmSync, statSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { readFileSync } from 'node:fs';

const out = 'dist/console';
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
await build({
  entryPoints: ['console/src/main.tsx'],
  outfile: `${out}/app.js`,
  bundle: true,
  minify: true,
  format: 'esm',
  target: ['es2022'],
  jsx: 'automatic',
  jsxImportSource: 'preact',
  legalComments: 'none',
  logLevel: 'warning',
});
for (const file of ['index.html', 'app.css', 'favicon.svg']) copyFileSync(`console/${file}`, `${out}/${file}`);

if (process.argv.includes('--size')) {
  let raw = 0;
  let gzipped = 0;
  for (const file of ['index.html', 'app.js', 'app.css', 'favicon.svg']) {
    raw += statSync(`${out}/${file}`).size;
    gzipped += gzipSync(readFileSync(`${out}/${file}`), { level: 9 }).length;
  }
  console.log(`console bundle: ${raw} bytes, ${gzipped} bytes gzipped`);
}
