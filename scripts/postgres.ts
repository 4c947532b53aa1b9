// `npm run postgres [-- --port N]`: a throwaway PostgreSQL for trying the gateway on PostgreSQL, or several
// replicas sharing one database, by hand. Prints the DATABASE_URL to give them; Ctrl-C stops it and deletes
// its data. Same binaries and mechanism as the tests (scripts/embedded-postgres.ts).
import { parseArgs } from 'node:util';

import { startEmbeddedPostgres } from './embedded-postgres.js';

const { values } = parseArgs({ options: { port: { type: 'string' } } });
const port = values.port === undefined ? undefined : Number(values.port);
if (port !== undefined && !(Number.isInteger(port) && port > 0 && port < 65536)) {
  console.error(`--port must be a TCP port number (1-65535), got "${values.port}"`);
  process.exit(2);
}

const server = await startEmbeddedPostgres({ ...(port !== undefined && { port }) });
const url = await server.createDatabase('gateway');
console.log(`PostgreSQL is ready on 127.0.0.1:${server.port}, database "gateway". Start replicas with, for example:

  npm run build
  DATABASE_URL='${url}' PORT=4001 node dist/src/main.js
  DATABASE_URL='${url}' PORT=4002 node dist/src/main.js

Ctrl-C stops PostgreSQL and deletes its data.`);

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    void server.stop().then(() => process.exit(0));
  });
}
