import { createHash } from 'node:crypto';
import type { Client } from 'graphql-ws';
import { afterEach, describe, expect, it } from 'vitest';

import { gatewaysPerTest, type TestGateway } from '../helpers/gateway.js';
import { collect, postNotification, QUERY, storedEvents, SUBSCRIPTION, wsClient } from '../helpers/mobile-id.js';

// Registered after the gateways' hook, so it runs first: clients go before their gateways.
const gateway = gatewaysPerTest();
const clients: Client[] = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.dispose()));
});

const ISSUE = `mutation($id: String, $ttl: Int) { issueMobileIdNotificationToken(authReqId: $id, ttlSeconds: $ttl) { token authReqId expiresAt } }`;

async function issue(gw: TestGateway, authReqId: string | null, options: { key?: string; ttl?: number } = {}) {
  const res = await gw.graphql(ISSUE, { id: authReqId, ttl: options.ttl }, options.key ? { key: options.key } : {});
  expect(res.errors).toBeUndefined();
  return res.data!.issueMobileIdNotificationToken as { token: string; authReqId: string | null; expiresAt: string };
}

describe('client_notification_tokens issued by the gateway', () => {
  it('accepts a token issued for an auth_req_id for that auth_req_id only', async () => {
    const gw = await gateway();
    const sb = gw.gateway.sandbox.mobileId!;
    // The lifetime is bracketed by the wall's clock before and after the call: a loaded machine may take long to
    // answer, which widens the bracket, never fails it.
    const before = Date.now();
    const issued = await issue(gw, 'bound-a', { ttl: 600 });
    const after = Date.now();
    expect(issued.token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(issued.authReqId).toBe('bound-a');
    expect(Date.parse(issued.expiresAt)).toBeGreaterThanOrEqual(before + 600_000);
    expect(Date.parse(issued.expiresAt)).toBeLessThanOrEqual(after + 600_000);

    const other = await postNotification(gw, (await sb.buildNotification({ authReqId: 'bound-b' })).body, {
      token: issued.token,
    });
    expect(other.status).toBe(401);
    expect(other.json).toEqual({
      error: 'invalid_token',
      error_description: expect.stringContaining('another auth_req_id'),
    });
    expect(await storedEvents(gw, 'bound-b')).toEqual([]);

    const own = await postNotification(gw, (await sb.buildNotification({ authReqId: 'bound-a' })).body, {
      token: issued.token,
    });
    expect(own.status).toBe(204);
  });

  it('accepts a token issued without an auth_req_id for any auth_req_id', async () => {
    const gw = await gateway();
    const { token, authReqId } = await issue(gw, null);
    expect(authReqId).toBeNull();
    const sb = gw.gateway.sandbox.mobileId!;
    expect(
      (await postNotification(gw, (await sb.buildNotification({ authReqId: 'any-1' })).body, { token })).status,
    ).toBe(204);
    expect(
      (
        await postNotification(gw, (await sb.buildNotification({ authReqId: 'any-2', outcome: 'SERVER_ERROR' })).body, {
          token,
        })
      ).status,
    ).toBe(204);
  });

  it('stores only the SHA-256 of an issued token, and refuses it once expired', async () => {
    const gw = await gateway();
    const { token } = await issue(gw, 'exp');
    const rows = await gw.gateway.services.store.db.selectFrom('notification_tokens').selectAll().execute();
    expect(rows).toHaveLength(1);
    expect(rows[0]!.token_hash).toBe(createHash('sha256').update(token).digest('hex'));
    expect(JSON.stringify(rows)).not.toContain(token);

    await gw.gateway.services.store.db
      .updateTable('notification_tokens')
      .set({ expires_at: Date.now() - 1 })
      .execute();
    const res = await postNotification(
      gw,
      (await gw.gateway.sandbox.mobileId!.buildNotification({ authReqId: 'exp' })).body,
      { token },
    );
    expect(res.status).toBe(401);
    expect(await gw.gateway.services.mobileId.purgeExpired()).toMatchObject({ notificationTokens: 1 });
  });

  it('refuses a ttlSeconds outside 10..604800 with BAD_USER_INPUT', async () => {
    const gw = await gateway();
    const res = await gw.graphql(ISSUE, { id: 'x', ttl: 5 });
    expect(res.errors![0]!.extensions!.code).toBe('BAD_USER_INPUT');
    expect(res.errors![0]!.message).toMatch(/ttlSeconds/);
  });

  it("keeps a notification sent with an app's token for that app's API key only", async () => {
    const gw = await gateway({
      GATEWAY_API_KEYS: 'key-a,key-b',
      SANDBOX_UPSTREAMS: 'cloud,identification,verification,rfm',
      MOBILEID_NOTIFICATION_TOKENS: 'static-token',
      MOBILEID_ISSUER: 'x',
      MOBILEID_CLIENT_ID: 'y',
    });
    const a = await issue(gw, 'scoped', { key: 'key-a' });
    const body = { auth_req_id: 'scoped', error: 'access_denied', error_description: 'client timeout' };
    expect((await postNotification(gw, body, { token: a.token })).status).toBe(204);

    expect((await gw.graphql(QUERY, { id: 'scoped' }, { key: 'key-a' })).data!.mobileIdAuthentication.reason).toBe(
      'CLIENT_TIMEOUT',
    );
    expect((await gw.graphql(QUERY, { id: 'scoped' }, { key: 'key-b' })).data!.mobileIdAuthentication).toBeNull();

    // Another key's subscription looks like one for an authentication with no result yet (docs/decisions/043): no
    // event, no error, still open. A one-tick heartbeat on the same socket completes after the subscribe was handled.
    const c = wsClient(gw, { key: 'key-b' });
    clients.push(c);
    const sub = collect(c, SUBSCRIPTION, { id: 'scoped' });
    const tick = collect(c, 'subscription { heartbeat(intervalMs: 10, count: 1) }', {});
    await tick.done;
    expect(sub.results).toEqual([]);
    expect(sub.errors).toEqual([]);
    expect(sub.completed()).toBe(false);
    sub.stop();

    // A notification sent with a configured token is every app's to read.
    expect((await postNotification(gw, { ...body, auth_req_id: 'shared' }, { token: 'static-token' })).status).toBe(
      204,
    );
    expect((await gw.graphql(QUERY, { id: 'shared' }, { key: 'key-b' })).data!.mobileIdAuthentication.reason).toBe(
      'CLIENT_TIMEOUT',
    );
  });

  it('refuses sandboxCompleteMobileIdAuthentication with a clear error when a real mobile ID service is configured', async () => {
    const gw = await gateway({
      GATEWAY_API_KEYS: 'k',
      SANDBOX_UPSTREAMS: 'cloud,identification,verification,rfm',
      MOBILEID_NOTIFICATION_TOKENS: 'static-token',
    });
    const res = await gw.graphql(
      `mutation { sandboxCompleteMobileIdAuthentication(authReqId: "x") { httpStatus } }`,
      {},
      { key: 'k' },
    );
    expect(res.errors![0]!.message).toMatch(/only in sandbox mode/);
    expect(res.errors![0]!.extensions).toMatchObject({ code: 'BAD_USER_INPUT', sandboxOnly: true });
    expect(await storedEvents(gw)).toEqual([]);
  });
});
