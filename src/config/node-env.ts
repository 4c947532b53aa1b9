// The first module src/main.ts imports, so that it runs before any library is loaded: NODE_ENV, unset, is
// `production`. The gateway reads no setting from it (every Apollo Server default that follows it is set explicitly,
// src/execution/apollo.ts), but graphql-js reads it once, when it is loaded: outside production each of its type
// tests (`isObjectType` and the like, on every subscribe and every variable coerced) that answers no also looks for
// a second copy of graphql-js, ~19 µs of CPU per notification in the realistic mix (docs/decisions/128).
// Set to anything, it is left as it is.
if (process.env.NODE_ENV === undefined) process.env.NODE_ENV = 'production';

export {};
