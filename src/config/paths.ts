import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The folder holding package.json: the same from src/ (tsx, vitest) and from dist/src/ (npm start). */
export const PROJECT_ROOT = (() => {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  while (!fs.existsSync(path.join(dir, 'package.json'))) {
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error('package.json not found above ' + fileURLToPath(import.meta.url));
    dir = parent;
  }
  return dir;
})();

export const SCHEMA_DIR = path.join(PROJECT_ROOT, 'schema');
export const GRAPHIQL_ASSETS_DIR = path.join(PROJECT_ROOT, 'dist', 'graphiql');
