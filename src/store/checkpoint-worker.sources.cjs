// From the sources only (tsx, vitest): a worker thread does not inherit the TypeScript loader of the process that
// starts it, so this loads checkpoint-worker.ts through tsx's require hook. The build runs checkpoint-worker.js.
require('tsx/cjs');
require('./checkpoint-worker.ts');
