#!/usr/bin/env node
// Bundles the self-hosted GraphiQL page (src/graphiql-app) and Monaco's three workers into
// dist/graphiql/ with stable names, so the gateway serves GraphiQL with no internet.
// Writes manifest.json last: src/server/graphiql.ts treats its absence as "not built".
// `--outdir DIR` builds elsewhere (tests build into a temporary directory).
import { createHash } from 'node:crypto';
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs, promisify } from 'node:util';
import { gzip } from 'node:zlib';
import { build } from 'esbuild';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const { values: args } = parseArgs({ options: { outdir: { type: 'string' } } });
const outdir = resolve(args.outdir ?? join(root, 'dist', 'graphiql'));
const started = performance.now();

const common = {
  absWorkingDir: root,
  bundle: true,
  format: 'esm',
  platform: 'browser',
  target: ['es2022', 'chrome111', 'firefox114', 'safari16.4'],
  minify: true,
  sourcemap: 'linked',
  legalComments: 'none',
  define: { 'process.env.NODE_ENV': '"production"' },
  logLevel: 'warning',
  outdir,
};

// Clear earlier output so a rename never leaves a stale file behind (the build is idempotent),
// but never a directory this script did not fill (a manifest.json, or only names it writes).
const ours = /^(manifest\.json|(graphiql|editor\.worker|json\.worker|graphql\.worker|codicon)\.[a-z.]+)$/;
const existing = await readdir(outdir).catch(() => []);
if (!existing.includes('manifest.json') && !existing.every((name) => ours.test(name))) {
  console.error(`build-graphiql: ${outdir} is not empty and holds no earlier GraphiQL build; refusing to clear it.`);
  process.exit(1);
}
await rm(outdir, { recursive: true, force: true });
await mkdir(outdir, { recursive: true });

await Promise.all([
  build({
    ...common,
    entryPoints: { graphiql: 'src/graphiql-app/main.tsx' },
    jsx: 'automatic',
    loader: { '.ttf': 'file' },
    assetNames: '[name]',
  }),
  build({
    ...common,
    entryPoints: {
      'editor.worker': 'monaco-editor/esm/vs/editor/editor.worker.js',
      'json.worker': 'monaco-editor/esm/vs/language/json/json.worker.js',
      'graphql.worker': 'monaco-graphql/esm/graphql.worker.js',
    },
  }),
]);

// The version the page puts on asset URLs, so browsers may cache them as immutable, and a
// gzip copy of each text asset, which the server sends to browsers that accept it.
const files = (await readdir(outdir)).sort();
const hash = createHash('sha256');
const sizes = {};
const gzipped = {};
await Promise.all(
  files.map(async (name) => {
    const content = await readFile(join(outdir, name));
    sizes[name] = content.length;
    if (/\.(js|css)$/.test(name)) {
      const compressed = await promisify(gzip)(content, { level: 9 });
      await writeFile(join(outdir, `${name}.gz`), compressed);
      gzipped[name] = compressed.length;
    }
  }),
);
for (const name of files)
  hash
    .update(name)
    .update('\0')
    .update(await readFile(join(outdir, name)));
const version = hash.digest('hex').slice(0, 16);
const sorted = (record) => Object.fromEntries(Object.entries(record).sort(([a], [b]) => a.localeCompare(b)));
await writeFile(
  join(outdir, 'manifest.json'),
  `${JSON.stringify({ version, files: sorted(sizes), gzip: sorted(gzipped) }, null, 2)}\n`,
);

const seconds = ((performance.now() - started) / 1000).toFixed(1);
const kib = (bytes) => `${(bytes / 1024).toFixed(0)} KiB`;
const main = ['graphiql.js', 'graphiql.css']
  .map((name) => `${name} ${kib(sizes[name])}, gzip ${kib(gzipped[name])}`)
  .join('; ');
console.log(`GraphiQL bundle built in ${seconds}s into ${outdir} (${main}; version ${version})`);
