// An MCP subscriptions/listen opened while PostgreSQL is stopped under the gateway (the fault matrix's set-up) with a
// reads budget set: the budget's check does not fail with the database (each replica then limits on its own, decision
// 023), so the listen is acknowledged as a live subscription over graphql-ws or SSE is, never thrown on to the route as
// a non-JSON-RPC answer.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { rawListen } from '../helpers/mcp.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';

let pg: TestPostgres;
let gw: TestGateway;
beforeAll(async () => {
  pg = await startPostgres();
  gw = await startTestGateway({
    DATABASE_URL: await pg.createDatabase('mcp_listen_stopped'),
    GATEWAY_API_KEYS: 'alpha:key-a',
    RATE_LIMIT_READS: '100/1h',
  });
}, 120_000);
afterAll(async () => {
  await gw?.close();
  await pg?.stop();
});

describe('subscriptions/listen with PostgreSQL stopped', () => {
  it('is acknowledged, as a live subscription over graphql-ws or SSE is answered as usual', async () => {
    const stream = new AbortController();
    let answer: unknown;
    await pg.restart({
      whileStopped: async () => {
        answer = await rawListen(gw, {
          key: 'key-a',
          id: 'pg-stopped',
          uris: ['mobileid://authentications/pg-stopped'],
          signal: stream.signal,
        }).catch((e) => String(e));
      },
    });
    stream.abort();
    expect(answer).toMatchObject({
      jsonrpc: '2.0',
      method: 'notifications/subscriptions/acknowledged',
      params: { notifications: { resourceSubscriptions: ['mobileid://authentications/pg-stopped'] } },
    });
  }, 120_000);
});
