// Bundles the CLI and the server into CommonJS files that bin/kvb runs with a V8 code cache
// (src/bundle/load-bundle.ts): one file each instead of ~900 modules, and no parsing on a cached run.
//   dist/load-bundle.cjs  the loader, and COMMAND_NAMES: the program's commands, for bin/kvb to choose a code cache by
//   dist/kvb-cli.cjs      src/cli/main.ts; `kvb serve` loads the next one through the loader
//   dist/kvb-server.cjs   src/server/run-server.ts and the stores (see SERVER_MODULES)
//   dist/sqlite-writer-worker.cjs  the SQLite writer thread's code in one file: a worker loads it at
//                         every SQLite start (as tsc's modules, with Kysely, it took most of a second on a busy machine)
import { build } from 'esbuild';
import { readFile, rm } from 'node:fs/promises';
import { builtinModules, createRequire } from 'node:module';
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
 * What the CLI reaches in the server bundle instead of bundling it again: the server, and what
 * `kvb db` commands use of the stores (with Kysely, pg and the SQLite driver). None of it is in the
 * CLI's bundle, which every `kvb get` reads. The server bundle's entry maps each to a function that
 * initialises that module on first use, so pg is evaluated only by a process that opens PostgreSQL.
 */
const SERVER_MODULES = [
  'server/run-server',
  'store/postgres/postgres-store',
  'store/sqlite/sqlite-store',
  'store/migration-status',
  'store/kvb-migrations',
];
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
    // Matched by the file imported: open-store.ts imports `./sqlite/sqlite-store.js`, serve.ts `../../server/run-server.js`.
    const names = SERVER_MODULES.map(fileName);
    b.onResolve({ filter: new RegExp(`/(${names.join('|')})\\.js$`) }, (args) => {
      const name = SERVER_MODULES.find((m) => resolve(args.resolveDir, args.path) === resolve(SRC, `${m}.js`));
      return name === undefined ? undefined : { path: name, namespace: 'server-bundle' };
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
    b.onLoad({ filter: /.*/, namespace: 'required' }, (args) => ({
      contents: `module.exports = require(${JSON.stringify(args.path)});`,
      loader: 'js',
    }));
  },
};

/**
 * Commander requires node:child_process when it loads, for subcommands that are separate executables,
 * which kvb has none of; loading it costs every `kvb` run several milliseconds (with dgram, pipes,
 * spawn_sync). Here it is required when first used instead.
 */
const lazyChildProcessInCommander = {
  name: 'lazy-child-process-in-commander',
  setup(b) {
    b.onLoad({ filter: /\/node_modules\/commander\/lib\/command\.js$/ }, async (args) => {
      const eager = "const childProcess = require('node:child_process');";
      const contents = await readFile(args.path, 'utf8');
      if (!contents.includes(eager))
        throw new Error(`${args.path} no longer has ${eager}: update the lazy-child-process-in-commander plugin`);
      const lazy = "const childProcess = { get spawn() { return require('node:child_process').spawn; } };";
      return { contents: contents.replace(eager, lazy), loader: 'js' };
    });
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
        contents = contents.replaceAll(
          'import.meta.url',
          `require('node:url').pathToFileURL(__dirname + ${JSON.stringify(`/${asBuilt}`)}).href`,
        );
      }
      return contents === before ? undefined : { contents, loader: 'ts' };
    });
  },
};

/**
 * The names bin/kvb keys code caches by, read off the commander program itself (src/cli/program.ts,
 * bundled in memory and run without parsing any argv) so that a new command gets its own cache
 * without a list to keep by hand. `help` is commander's implicit command (`kvb help get`). They are
 * appended to the loader bin/kvb requires anyway, so choosing a cache reads no extra file.
 */
async function commandNames() {
  const { outputFiles } = await build({
    ...common,
    entryPoints: ['src/cli/program.ts'],
    packages: 'external',
    write: false,
    plugins: [sourceTransforms],
  });
  const module = { exports: {} };
  // Run as if from dist/, where source-transforms points each module's import.meta.url.
  const dir = resolve('dist');
  new Function('module', 'exports', 'require', '__dirname', outputFiles[0].text)(
    module,
    module.exports,
    createRequire(`${dir}/kvb-cli.cjs`),
    dir,
  );
  return [...module.exports.buildProgram().commands.map((command) => command.name()), 'help'];
}

// `--outdir DIR` builds elsewhere (test/unit/build-bundle.test.ts checks a build prints no warning without touching dist/).
const at = process.argv.indexOf('--outdir');
const OUT = at === -1 ? 'dist' : process.argv[at + 1];

const commands = await commandNames();
// Caches of the previous build would never match again.
await rm(`${OUT}/.code-cache`, { recursive: true, force: true });
await Promise.all([
  build({
    ...common,
    entryPoints: ['src/bundle/load-bundle.ts'],
    outfile: `${OUT}/load-bundle.cjs`,
    footer: { js: `module.exports.COMMAND_NAMES = ${JSON.stringify(commands)};` },
  }),
  build({
    ...common,
    entryPoints: ['src/cli/main.ts'],
    outfile: `${OUT}/kvb-cli.cjs`,
    plugins: [throughServerBundle, dynamicImportAsRequire, sourceTransforms, lazyChildProcessInCommander],
  }),
  build({
    ...common,
    entryPoints: ['src/store/sqlite/sqlite-writer-worker.ts'],
    outfile: `${OUT}/sqlite-writer-worker.cjs`,
    plugins: [sourceTransforms],
  }),
  build({
    ...common,
    stdin: serverBundleEntry,
    outfile: `${OUT}/kvb-server.cjs`,
    plugins: [dynamicImportAsRequire, ownFiles, sourceTransforms],
  }),
]);
