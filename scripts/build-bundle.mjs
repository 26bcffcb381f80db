// Bundles the CLI and the server into CommonJS files that bin/kvb runs with a V8 code cache
// (src/bundle/load-bundle.ts): one file each instead of ~900 modules, and no parsing on a cached run.
//   dist/load-bundle.cjs  the loader
//   dist/kvb-cli.cjs      src/cli/main.ts; `kvb serve` loads the next one through the loader
//   dist/kvb-server.cjs   src/server/run-server.ts and the stores (see SERVER_MODULES)
import { build } from 'esbuild';
import { readFile, rm } from 'node:fs/promises';
import { builtinModules } from 'node:module';
import { dirname, relative, resolve, sep } from 'node:path';

const SRC = resolve('src');

// Native, or started from its own files in a worker thread, or optional.
const EXTERNAL = ['better-sqlite3', 'pino-pretty', 'thread-stream', 'pg-native'];

/**
 * Bundled packages that read their own files at run time (Swagger UI's page, scripts and styles):
 * their `__dirname` stays their directory in node_modules, found when the bundle runs.
 */
const OWN_FILES = ['@fastify/swagger-ui'];

const ownFiles = {
  name: 'own-files',
  setup(b) {
    for (const name of OWN_FILES) {
      const root = resolve('node_modules', name);
      b.onLoad({ filter: new RegExp(`/node_modules/${name.replace('/', '\\/')}/.*\\.js$`) }, async (args) => {
        const contents = await readFile(args.path, 'utf8');
        const sub = relative(root, dirname(args.path)).split(sep).join('/');
        const dir = `require('node:path').join(require('node:path').dirname(require.resolve(${JSON.stringify(`${name}/package.json`)})), ${JSON.stringify(sub)})`;
        return { contents: contents.replaceAll('__dirname', dir), loader: 'js' };
      });
    }
  },
};

/**
 * What the CLI reaches in the server bundle instead of bundling it again: the server, and the two
 * stores (with Kysely, pg and the SQLite driver) that `kvb db` commands open. The server bundle's
 * entry maps each to a function that initialises that module on first use, so pg is evaluated only
 * by a process that opens PostgreSQL.
 */
const SERVER_MODULES = ['server/run-server', 'store/postgres/postgres-store', 'store/sqlite/sqlite-store'];
const fileName = (m) => m.split('/').pop();

const serverBundleEntry = {
  contents: `module.exports = {\n${SERVER_MODULES.map((m) => `  ${JSON.stringify(m)}: () => require('./${m}.ts'),`).join('\n')}\n};\n`,
  resolveDir: 'src',
  sourcefile: 'server-bundle-entry.js',
  loader: 'js',
};

const throughServerBundle = {
  name: 'through-server-bundle',
  setup(b) {
    // Matched by file name: open-store.ts imports `./sqlite-store.js`, serve.ts `../../server/run-server.js`.
    const names = SERVER_MODULES.map(fileName);
    b.onResolve({ filter: new RegExp(`/(${names.join('|')})\\.js$`) }, (args) => {
      const name = SERVER_MODULES.find((m) => args.path.endsWith(`/${fileName(m)}.js`));
      return { path: name, namespace: 'server-bundle' };
    });
    b.onResolve({ filter: /^\.\/load-bundle\.cjs$/ }, () => ({ path: './load-bundle.cjs', external: true }));
    b.onLoad({ filter: /.*/, namespace: 'server-bundle' }, (args) => ({
      contents: `module.exports = require('./load-bundle.cjs').loadBundle(require('node:path').join(__dirname, 'kvb-server.cjs'))[${JSON.stringify(args.path)}]();`,
      loader: 'js',
    }));
  },
};

/**
 * `await import()` of a module left outside the bundle (a Node built-in, a native module) would stay
 * an import() call, which code compiled by vm.Script cannot make: it becomes a require().
 */
const dynamicImportAsRequire = {
  name: 'dynamic-import-as-require',
  setup(b) {
    b.onResolve({ filter: /.*/ }, (args) => {
      if (args.kind !== 'dynamic-import') return undefined;
      const outside = args.path.startsWith('node:') || builtinModules.includes(args.path) || EXTERNAL.includes(args.path);
      return outside ? { path: args.path, namespace: 'required' } : undefined;
    });
    b.onLoad({ filter: /.*/, namespace: 'required' }, (args) => ({ contents: `module.exports = require(${JSON.stringify(args.path)});`, loader: 'js' }));
  },
};

const common = {
  bundle: true,
  platform: 'node',
  format: 'cjs',
  target: 'node20',
  // The own-files plugin's require.resolve('<name>/package.json') is answered at run time from
  // node_modules, so esbuild must leave that path out of the bundle (it warns otherwise).
  external: [...EXTERNAL, ...OWN_FILES.map((name) => `${name}/package.json`)],
  legalComments: 'none',
  // The loader reads the bundles as latin1, which is exact for ASCII.
  charset: 'ascii',
  logLevel: 'warning',
  // Kept readable: stack traces of unexpected errors name real functions.
  minify: false,
  keepNames: false,
  sourcemap: false,
};

/**
 * Two rewrites of kvb's own sources. Each file's `import.meta.url` becomes the URL its tsc output
 * would have (dist/<path>.js), so what is found relative to it (package.json, dist/console/) is
 * found from the bundle too. And a module's `createRequire(import.meta.url)` would hide what it
 * requires from esbuild: in the bundle it is the bundle's require, so undici is bundled (and cached).
 */
const sourceTransforms = {
  name: 'source-transforms',
  setup(b) {
    b.onLoad({ filter: /\/src\/.*\.ts$/ }, async (args) => {
      let contents = await readFile(args.path, 'utf8');
      const before = contents;
      contents = contents.replace(/const require = createRequire\(import\.meta\.url\);/, '');
      if (contents.includes('import.meta.url')) {
        const asBuilt = relative(SRC, args.path).replace(/\.ts$/, '.js');
        contents = contents.replaceAll('import.meta.url', `require('node:url').pathToFileURL(__dirname + ${JSON.stringify(`/${asBuilt}`)}).href`);
      }
      return contents === before ? undefined : { contents, loader: 'ts' };
    });
  },
};

// `--outdir DIR` builds elsewhere (test/unit/build-bundle.test.ts checks a build prints no warning without touching dist/).
const at = process.argv.indexOf('--outdir');
const OUT = at === -1 ? 'dist' : process.argv[at + 1];

// Caches of the previous build would never match again.
await rm(`${OUT}/.code-cache`, { recursive: true, force: true });
await Promise.all([
  build({ ...common, entryPoints: ['src/bundle/load-bundle.ts'], outfile: `${OUT}/load-bundle.cjs` }),
  build({ ...common, entryPoints: ['src/cli/main.ts'], outfile: `${OUT}/kvb-cli.cjs`, plugins: [throughServerBundle, dynamicImportAsRequire, sourceTransforms] }),
  build({ ...common, stdin: serverBundleEntry, outfile: `${OUT}/kvb-server.cjs`, plugins: [dynamicImportAsRequire, ownFiles, sourceTransforms] }),
]);
