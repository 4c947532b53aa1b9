import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

import { ROOT } from './processes.js';

/** What `npm start` runs, relative to a checkout: the TypeScript compiler's output of `src/`. */
export const BUILT_MAIN = 'dist/src/main.js';

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
