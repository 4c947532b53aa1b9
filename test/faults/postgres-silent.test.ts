// PostgreSQL that stops answering without closing its connections (a network partition, a host gone): a query and a
// creation are answered SERVICE_UNAVAILABLE within the store's timeouts (docs/contract.md), with no raw message of the
// driver, instead of waiting for good; once the database answers again, the gateway serves, and a retry of the
// creation with the same key creates once. A statement that is only slow (a migration, a purge of a long backlog) is
// not cut: the database still answers a probe beside it.
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, describe, expect, it } from 'vitest';

import { createProjectProbe } from '../helpers/faults.js';
import { gatewayBehindRelay } from '../helpers/pg-relay.js';

const { post, expectEachCreatesOnce, made } = createProjectProbe('pg-silent');

describe('PostgreSQL silent under a request', () => {
  let setup: Awaited<ReturnType<typeof gatewayBehindRelay>> | undefined;
  afterAll(() => setup?.close());

  it('answers SERVICE_UNAVAILABLE, not never, and serves again once the database answers', async () => {
    setup = await gatewayBehindRelay('pg_silent');
    const { gw, link, port } = setup;
    expect((await gw.graphql('{ projects { id } }')).status).toBe(200);

    link.silence();
    const query = await gw.graphql('{ projects { id } }');
    expect(query.status).toBe(503);
    expect(query.errors?.[0]?.extensions).toEqual({ code: 'SERVICE_UNAVAILABLE', retryAfter: 5 });
    const key = randomUUID();
    const created = await post(gw, key);
    expect(created.status, created.raw).toBe(503);
    expect(created.retryAfter).toBe('5');
    expect(created.body.errors[0].extensions).toEqual({ code: 'SERVICE_UNAVAILABLE', retryAfter: 5 });
    for (const raw of [JSON.stringify(query), created.raw])
      for (const word of ['Connection terminated', 'timeout', '127.0.0.1', port, 'password'])
        expect(raw).not.toContain(word);
    expect(made(gw)).toHaveLength(0);

    link.restore();
    expect((await gw.graphql('{ projects { id } }')).status).toBe(200);
    await expectEachCreatesOnce([[gw, key]]);
    expect(made(gw)).toHaveLength(1);
  }, 120_000);

  it('lets a statement that is only slow run past the silence check, the database answering beside it', async () => {
    expect(setup, 'the first test started the gateway').toBeDefined();
    const { gw } = setup!;
    const before = gw.logs().length;
    const slept = await sql<{ slept: string }>`select pg_sleep(12)::text as slept`.execute(
      gw.gateway.services.store.db,
    );
    expect(slept.rows).toEqual([{ slept: '' }]);
    expect(gw.logs().slice(before)).not.toMatch(/answered neither a statement nor a probe/);
  }, 60_000);
});
