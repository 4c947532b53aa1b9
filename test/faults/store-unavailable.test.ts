// PostgreSQL away under a request (docs/contract.md, SERVICE_UNAVAILABLE): a creation is answered as retryable on
// every transport (HTTP 503 with Retry-After and SERVICE_UNAVAILABLE, the same code over graphql-ws), a webhook gets
// a 503 so that its sender retries, nothing raw reaches anyone, and a retry with the same key after the restart
// creates exactly once.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { createProjectProbe } from '../helpers/faults.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { postNotification, wsClient } from '../helpers/mobile-id.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';

const { post, first, expectEachCreatesOnce, made } = createProjectProbe('pg-away');

function overWs(gw: TestGateway, key: string): Promise<{ raw: string; errors: any[] }> {
  const client = wsClient(gw);
  return first(client, key).finally(() => client.dispose());
}

describe('PostgreSQL away under a creation', () => {
  let pg: TestPostgres;
  let direct: TestGateway;
  let apollo: TestGateway;

  beforeAll(async () => {
    pg = await startPostgres();
    const DATABASE_URL = await pg.createDatabase('store_unavailable');
    direct = await startTestGateway({ DATABASE_URL });
    apollo = await startTestGateway({ DATABASE_URL }, { testing: { directPath: false } });
  }, 120_000);
  afterAll(async () => {
    await direct?.close();
    await apollo?.close();
    await pg?.stop();
  });

  it('is SERVICE_UNAVAILABLE, 503 with Retry-After over HTTP, on every transport; a retry after the restart creates once', async () => {
    const keys = { direct: randomUUID(), apollo: randomUUID(), ws: randomUUID() };
    const seen: Record<string, unknown> = {};
    await pg.restart({
      whileStopped: async () => {
        for (const [name, gw] of [
          ['direct', direct],
          ['apollo', apollo],
        ] as const) {
          const res = await post(gw, keys[name]);
          seen[name] = res;
          expect(res.status, res.raw).toBe(503);
          expect(res.retryAfter).toBe('5');
          expect(res.body.errors[0].extensions).toEqual({ code: 'SERVICE_UNAVAILABLE', retryAfter: 5 });
          for (const raw of ['ECONNREFUSED', '127.0.0.1', 'password']) expect(res.raw).not.toContain(raw);
        }
        const ws = await overWs(direct, keys.ws);
        expect(ws.errors[0]?.extensions, ws.raw).toEqual({ code: 'SERVICE_UNAVAILABLE', retryAfter: 5 });
        expect(ws.raw).not.toContain('ECONNREFUSED');
        // A webhook is not acknowledged: its sender retries on a 503.
        const hook = await postNotification(direct, {
          auth_req_id: `pg-away-${randomUUID()}`,
          error: 'access_denied',
          error_description: 'the user declined',
        });
        expect(hook.status, hook.text).toBe(503);
        expect(hook.json).toMatchObject({ error: 'temporarily_unavailable' });
        expect(hook.headers['retry-after']).toBe('5');
      },
    });
    expect(direct.logs()).toContain('ECONNREFUSED');
    expect(made(direct)).toHaveLength(0);
    expect(made(apollo)).toHaveLength(0);

    // After the restart each key creates once, and a second retry replays.
    await expectEachCreatesOnce([
      [direct, keys.direct],
      [apollo, keys.apollo],
      [direct, keys.ws],
    ]);
    // Each gateway has its own sandbox: the direct and graphql-ws keys reached the first, Apollo's the second.
    expect(made(direct)).toHaveLength(2);
    expect(made(apollo)).toHaveLength(1);
  }, 120_000);
});
