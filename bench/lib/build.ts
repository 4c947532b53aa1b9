import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { build } from 'esbuild';

import { ROOT } from './processes.js';

/** What `npm start` runs, relative to a checkout: the TypeScript compiler's output of `src/`. */
export const BUILT_MAIN = 'dist/src/main.js';

/**
 * The options `npm start` gives node in a checkout: its package.json's `start` is `node <options> dist/src/main.js`
 * (`--no-memory-reducer` since docs/decisions/146, `--min-semi-space-size=16` since 147; none before). The suite starts
 * every gateway with its own checkout's, so that a `--compare` tree runs as its own `npm start` ran it, and the
 * references written by hand (the durable and bare baselines, the mix's floor) with this checkout's.
 */
export function startNodeArgs(checkout: string): string[] {
  const pkg = JSON.parse(fs.readFileSync(path.join(checkout, 'package.json'), 'utf8')) as {
    scripts?: Record<string, string>;
  };
  const words = (pkg.scripts?.start ?? '').trim().split(/\s+/);
  if (words[0] !== 'node' || words.at(-1) !== BUILT_MAIN) {
    throw new Error(
      `${checkout}: npm start is not \`node [options] ${BUILT_MAIN}\`: ${JSON.stringify(pkg.scripts?.start)}`,
    );
  }
  return words.slice(1, -1);
}

/**
 * Compiles a checkout's `src/` as `npm run build` does (`tsc -p tsconfig.build.json`, into its `dist/`; the GraphiQL
 * bundle is left out: no scenario loads it), with this repository's TypeScript. The suite measures the gateway as
 * `npm start` runs it: under `tsx`, every function the code makes per request also costs esbuild's `__name` call,
 * which the shipped build does not make. Returns the script to start, relative to the checkout.
 */
export function buildGateway(checkout: string): string {
  const tsc = path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
  if (!fs.existsSync(path.join(checkout, 'tsconfig.build.json'))) {
    throw new Error(`${checkout} has no tsconfig.build.json: not a checkout of the gateway`);
  }
  execFileSync(process.execPath, [tsc, '-p', path.join(checkout, 'tsconfig.build.json')], {
    cwd: checkout,
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  return BUILT_MAIN;
}

/**
 * Compiles a checkout's `src/` (not the browser's `src/graphiql-app/`) into JavaScript beside its sources
 * (`src/main.js` next to `src/main.ts`), file by file with esbuild as tsx does, but once for every process that runs
 * it and without tsx's `__name` call on every function made: ~0.3 s for the tree, and a gateway then starts in ~1.5 s
 * of CPU against 3–5 s under tsx (6 s in a folder tsx has not seen). Returns the script to start, relative to the
 * checkout. `npm run bench:guard` starts its gateways so; the scenarios take tsc's build (`buildGateway`).
 */
export async function compileBeside(checkout: string): Promise<string> {
  const src = path.join(checkout, 'src');
  const sources = fs
    .readdirSync(src, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts') && !f.startsWith(`graphiql-app${path.sep}`))
    .map((f) => path.join(src, f));
  await build({
    entryPoints: sources,
    outdir: path.join(checkout, 'src'),
    outbase: path.join(checkout, 'src'),
    format: 'esm',
    platform: 'node',
    target: 'node20',
    tsconfig: path.join(checkout, 'tsconfig.json'),
    logLevel: 'error',
  });
  return 'src/main.js';
}

/** One TypeScript module and what it imports, bundled into `outfile` (ES module), for `node --import` without tsx. */
export async function compileModule(source: string, outfile: string): Promise<void> {
  await build({
    entryPoints: [source],
    outfile,
    bundle: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    logLevel: 'error',
  });
}
