// /readyz while PostgreSQL stops answering without closing its connections (a network partition, a host gone): the
// check answers 503 naming the database, instead of waiting for an answer that never comes.
import { request } from 'undici';
import { afterAll, describe, expect, it } from 'vitest';

import { gatewayBehindRelay } from '../helpers/pg-relay.js';

describe('readiness while the database does not answer', () => {
  let setup: Awaited<ReturnType<typeof gatewayBehindRelay>> | undefined;
  afterAll(() => setup?.close());

  it('answers 503 naming the database', async () => {
    setup = await gatewayBehindRelay('readyz_silent');
    const { gw, link } = setup;
    const ready = await request(`${gw.url}/readyz`);
    expect(ready.statusCode).toBe(200);
    await ready.body.dump();

    link.silence();
    const res = await request(`${gw.url}/readyz`);
    expect(res.statusCode).toBe(503);
    expect(await res.body.json()).toMatchObject({ status: 'unavailable', store: 'postgres' });
  }, 60_000);
});
