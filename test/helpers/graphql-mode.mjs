// Preloaded into a gateway child process (NODE_OPTIONS=--import=…) by test/gateway/node-env.test.ts, when
// GRAPHQL_MODE_LOG names a file: at exit it writes NODE_ENV and the mode graphql-js was loaded in, as JSON. The mode
// is read from graphql-js's own `instanceOf` (the module the gateway loaded, from require's cache): in development it
// throws on an object that names a graphql-js class without being one (its check for a second copy of graphql-js), in
// production it answers false. graphql-js is required only at exit, so this file does not load it first.
import fs from 'node:fs';
import { createRequire } from 'node:module';

const file = process.env.GRAPHQL_MODE_LOG;
if (file) {
  const require = createRequire(import.meta.url);
  process.once('exit', () => {
    const { instanceOf } = require('graphql/jsutils/instanceOf.js');
    const { GraphQLScalarType } = require('graphql');
    let graphql = 'production';
    try {
      instanceOf({ [Symbol.toStringTag]: 'GraphQLScalarType' }, GraphQLScalarType);
    } catch {
      graphql = 'development';
    }
    fs.writeFileSync(file, JSON.stringify({ nodeEnv: process.env.NODE_ENV ?? null, graphql }));
  });
}
