import { createRequire } from 'node:module';
import { defineConfig } from 'vitest/config';

const require = createRequire(import.meta.url);
const GUARD_TEST = 'test/bench/guard.test.ts';

export default defineConfig({
  resolve: {
    // graphql 16 ships index.mjs (picked by Vite's `module` field) beside index.js (picked by Node, so by
    // Apollo and graphql-tools). Two copies make "Cannot use GraphQLSchema from another module or realm";
    // pin every import of `graphql` to the one Node loads.
    alias: [{ find: /^graphql$/, replacement: require.resolve('graphql') }],
  },
  test: {
    globalSetup: ['test/helpers/postgres-preflight.ts', 'test/helpers/temp-root.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Integration tests start real servers and databases; two workers match the 2-core CI machine.
    maxWorkers: 2,
    projects: [
      { extends: true, test: { name: 'suite', include: ['test/**/*.test.ts'], exclude: [GUARD_TEST] } },
      // The speed guard's own test measures CPU per operation: it runs alone, once every other file has finished,
      // so that the rest of the suite does not stand on the cores it measures.
      {
        extends: true,
        test: { name: 'speed', include: [GUARD_TEST], fileParallelism: false, sequence: { groupOrder: 1 } },
      },
    ],
  },
});
