// /readyz while PostgreSQL stops answering without closing its connections (a network partition, a host gone): the
// check answers 503 naming the database, instead of waiting for an answer that never comes.
import { request } from 'undici';
import { afterAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { pgRelay } from '../helpers/pg-relay.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';

describe('readiness while the database does not answer', () => {
  let pg: TestPostgres | undefined;
  let gw: TestGateway | undefined;
  let link: ReturnType<typeof pgRelay> | undefined;
  afterAll(async () => {
    // The silent connections are cut first, so that the gateway's pool ends.
    link?.close();
    await gw?.close();
    await pg?.stop();
  });

  it('answers 503 naming the database', async () => {
    pg = await startPostgres();
    const url = new URL(await pg.createDatabase('readyz_silent'));
    link = pgRelay(Number(url.port));
    url.port = String(await link.listening);
    gw = await startTestGateway({ DATABASE_URL: url.toString() });
    const ready = await request(`${gw.url}/readyz`);
    expect(ready.statusCode).toBe(200);
    await ready.body.dump();

    link.silence();
    const res = await request(`${gw.url}/readyz`);
    expect(res.statusCode).toBe(503);
    expect(await res.body.json()).toMatchObject({ status: 'unavailable', store: 'postgres' });
  }, 60_000);
});
