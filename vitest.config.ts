import { createRequire } from 'node:module';
import { defineConfig } from 'vitest/config';

const require = createRequire(import.meta.url);
// Tests that measure CPU: the speed guard's, and the CPU its planted slowdown spends.
const SPEED_TESTS = ['test/bench/guard.test.ts', 'test/bench/guard-hooks.test.ts'];
// Tests that need a worker process of their own (a fresh module cache and heap), each with the reason.
const ISOLATED_TESTS = [
  // Counts live objects of a class in the heap (v8.queryObjects, after a full collection) against a base taken in
  // the test: in a shared worker, what earlier files left in the heap makes each count slow (a shuffled run timed out
  // there) and could die between the base and the count.
  'test/server/ws-complete-with-last.test.ts',
  // The same counts, of closed gateways: CI timed it out in a shared worker (67 s, four counts over an inherited heap).
  'test/gateway/closed-gateways-are-released.test.ts',
];

export default defineConfig({
  resolve: {
    // graphql 16 ships index.mjs (picked by Vite's `module` field) beside index.js (picked by Node, so by
    // Apollo and graphql-tools). Two copies make "Cannot use GraphQLSchema from another module or realm";
    // pin every import of `graphql` to the one Node loads.
    alias: [{ find: /^graphql$/, replacement: require.resolve('graphql') }],
  },
  test: {
    globalSetup: ['test/helpers/postgres-preflight.ts', 'test/helpers/temp-root.ts'],
    // Deadlines bound a failure only (every test waits for events, not durations): wide enough for a loaded CI machine,
    // where a child gateway's start has read 11-20 s.
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: 'forks',
    // Integration tests start real servers and databases; two workers match the 2-core CI machine.
    maxWorkers: 2,
    projects: [
      // Files share a worker process and its module cache: src/ and the helpers are evaluated once per worker, not once
      // per file (that evaluation was a third of the suite's time). test/helpers/shared-worker.ts puts back what a file
      // changed in the process; files that change what it cannot put back run in `isolated`.
      {
        extends: true,
        test: {
          name: 'suite',
          include: ['test/**/*.test.ts'],
          exclude: [...SPEED_TESTS, ...ISOLATED_TESTS],
          isolate: false,
          setupFiles: ['test/helpers/shared-worker.ts'],
        },
      },
      // After the shared files (a worker is kept only between files of one kind), before the speed tests.
      { extends: true, test: { name: 'isolated', include: ISOLATED_TESTS, sequence: { groupOrder: 1 } } },
      // These measure CPU per operation: they run alone, one file at a time, once every other file has finished, so
      // that the rest of the suite does not stand on the cores they measure. Run among the others, the planted spin
      // read 1.21 times its ask, past its bound, in the CI run of the fiftieth session's stop.
      {
        extends: true,
        test: { name: 'speed', include: SPEED_TESTS, fileParallelism: false, sequence: { groupOrder: 2 } },
      },
    ],
  },
});
