import path from 'node:path';

import { envPairs } from './env.js';
import { ROOT } from './processes.js';

/** One `--variant name:KEY=VALUE,…` of an experiment that runs gateways side by side. */
export interface Variant {
  name: string;
  /** The settings but `dir`: environment variables, or keys the experiment reads itself. */
  env: Record<string, string>;
  /** The build to run: `dir=<a dist/>`, this checkout's dist/ without it. */
  dist: string;
}

/** `--variant` values as gateways to start (`fallback` when none was given). */
export function parseVariants(specs: string[] | undefined, fallback: string[]): Variant[] {
  return (specs?.length ? specs : fallback).map((v) => {
    const colon = v.indexOf(':');
    const [name, settings] = colon === -1 ? [v, ''] : [v.slice(0, colon), v.slice(colon + 1)];
    const { dir = path.join(ROOT, 'dist'), ...env } = envPairs(settings, '--variant');
    return { name, env, dist: path.resolve(dir) };
  });
}
