// Monaco asks MonacoEnvironment.getWorker for a worker per language; GraphiQL's own
// setup-workers modules load them from a CDN or rely on bundler magic, so this module
// points Monaco at the worker files that scripts/build-graphiql.mjs writes next to the
// page bundle. It must be imported before graphiql (see main.tsx).
import type { Environment } from 'monaco-editor';

/** Worker files written by scripts/build-graphiql.mjs, by Monaco worker label. */
const WORKER_FILES = {
  json: 'json.worker.js',
  graphql: 'graphql.worker.js',
  editor: 'editor.worker.js',
} as const;

function workerFileFor(label: string): string {
  if (label === 'json') return WORKER_FILES.json;
  if (label === 'graphql') return WORKER_FILES.graphql;
  return WORKER_FILES.editor;
}

const environment: Environment = {
  getWorker(_workerId: string, label: string): Worker {
    // Resolved against this bundle's own URL, so the workers follow wherever the assets are
    // served, and keep its `?v=<build>` query, under which the server lets browsers cache them.
    const bundle = new URL(import.meta.url);
    return new Worker(new URL(`${workerFileFor(label)}${bundle.search}`, bundle), { type: 'module' });
  },
};

(globalThis as { MonacoEnvironment?: Environment }).MonacoEnvironment = environment;
