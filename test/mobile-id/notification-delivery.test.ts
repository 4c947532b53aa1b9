import { randomUUID } from 'node:crypto';
import type { Client } from 'graphql-ws';
import { afterEach, describe, expect, it } from 'vitest';

import { gatewaysPerTest, type TestGateway } from '../helpers/gateway.js';
import { collect, postNotification, QUERY, storedEvents, SUBSCRIPTION, wsClient } from '../helpers/mobile-id.js';
import { subscribers, waitFor, waitForSubscribers } from '../helpers/wait.js';

// Registered after the gateways' hook, so it runs first: clients go before their gateways.
const gateway = gatewaysPerTest();
const clients: Client[] = [];
function client(gw: TestGateway): Client {
  const c = wsClient(gw);
  clients.push(c);
  return c;
}
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.dispose()));
});

const sandboxOf = (gw: TestGateway) => gw.gateway.sandbox.mobileId!;

describe('mobile-ID notifications reach subscribers', () => {
  it('delivers a success notification to a waiting subscriber, with the tokens and the id_token claims, then completes', async () => {
    const gw = await gateway();
    const id = `req-${randomUUID()}`;
    const sub = collect(client(gw), SUBSCRIPTION, { id });
    await waitForSubscribers(gw, 'mobile-id', id);

    const n = await sandboxOf(gw).buildNotification({
      authReqId: id,
      correlationId: 'corr-1',
      fields: { leading_kyc_match: true },
    });
    const res = await postNotification(gw, n.body, { headers: n.headers });
    expect(res.status).toBe(204);
    expect(res.text).toBe('');
    await sub.done;

    expect(sub.errors).toEqual([]);
    expect(sub.completed()).toBe(true);
    expect(sub.results).toHaveLength(1);
    const a = sub.results[0].data.mobileIdAuthentication;
    expect(a).toMatchObject({
      __typename: 'MobileIdAuthenticated',
      authReqId: id,
      accessToken: n.body.access_token,
      tokenType: 'Bearer',
      idToken: n.body.id_token,
      idTokenVerified: true,
      acr: '2',
      amr: ['SIM_PIN'],
      issuer: sandboxOf(gw).issuer,
      leadingKycMatch: true,
      correlationId: 'corr-1',
      requestId: n.headers['x-mobileid-request-id'],
      transactionId: n.headers['x-mobileid-transaction-id'],
      jwksUri: null,
    });
    expect(a.subject).toMatch(/^[0-9a-f]{32}$/);
    const expiresIn = Date.parse(a.expiresAt) - Date.parse(a.receivedAt);
    expect(expiresIn).toBeGreaterThan(3_599_000);
    expect(expiresIn).toBeLessThan(3_601_000);
    // The extra fields real senders add are kept, as sent.
    expect(a.otherFields).toEqual({
      jwks_endpoint: n.body.jwks_endpoint,
      premiuminfo_endpoint: n.body.premiuminfo_endpoint,
      kyc_match_endpoint: n.body.kyc_match_endpoint,
    });
  });

  it('delivers a failure notification with its error, description and reason', async () => {
    const gw = await gateway();
    const id = `req-${randomUUID()}`;
    const sub = collect(client(gw), SUBSCRIPTION, { id });
    await waitForSubscribers(gw, 'mobile-id', id);

    const n = await sandboxOf(gw).buildNotification({ authReqId: id, outcome: 'CANCELLED_BY_USER' });
    expect((await postNotification(gw, n.body, { headers: n.headers })).status).toBe(204);
    await sub.done;

    expect(sub.results).toHaveLength(1);
    expect(sub.results[0].data.mobileIdAuthentication).toMatchObject({
      __typename: 'MobileIdAuthenticationFailed',
      authReqId: id,
      error: 'access_denied',
      errorDescription: 'the client cancelled the authentication',
      reason: 'CANCELLED_BY_USER',
      requestId: n.headers['x-mobileid-request-id'],
    });
  });

  it('maps every row of the spec error table to its reason, and an unknown error code to UNKNOWN, keeping it', async () => {
    const gw = await gateway();
    const rows = {
      CLIENT_TIMEOUT: ['access_denied', 'client timeout'],
      CANCELLED_BY_USER: ['access_denied', 'the client cancelled the authentication'],
      AUTHENTICATION_ERROR: ['access_denied', 'error authentication'],
      SMS_ATTEMPTS_EXHAUSTED: ['access_denied', 'the client has run out of attempts to authorize by sms code'],
      HHE_REQUEST_FAILED: ['access_denied', 'HHE request failed'],
      LOGIN_HINT_MISMATCH: ['access_denied', 'Login hint doesn’t match'],
      SERVER_ERROR: ['server_error', 'internal Server Error'],
      UNKNOWN: ['interaction_required', 'something new'],
    } as const;
    for (const [reason, [error, description]] of Object.entries(rows)) {
      const id = `req-${reason}`;
      const res = await postNotification(gw, {
        auth_req_id: id,
        error,
        error_description: description,
        vendor_code: 42,
      });
      expect(res.status, reason).toBe(204);
      const q = await gw.graphql(QUERY, { id });
      expect(q.data!.mobileIdAuthentication, reason).toMatchObject({
        reason,
        error,
        errorDescription: description,
        otherFields: { vendor_code: 42 },
      });
    }
    // A plain apostrophe instead of the spec's typographic one is the same row.
    await postNotification(gw, {
      auth_req_id: 'plain',
      error: 'access_denied',
      error_description: "Login hint doesn't match",
    });
    expect((await gw.graphql(QUERY, { id: 'plain' })).data!.mobileIdAuthentication.reason).toBe('LOGIN_HINT_MISMATCH');
  });

  it('gives a subscriber that comes after the notification the stored event at once, and the query returns it too', async () => {
    const gw = await gateway();
    const id = `req-${randomUUID()}`;
    const n = await sandboxOf(gw).buildNotification({ authReqId: id });
    expect((await postNotification(gw, n.body)).status).toBe(204);

    const late = collect(client(gw), SUBSCRIPTION, { id });
    await late.done;
    expect(late.completed()).toBe(true);
    expect(late.results).toHaveLength(1);
    expect(late.results[0].data.mobileIdAuthentication).toMatchObject({
      authReqId: id,
      accessToken: n.body.access_token,
    });

    const q = await gw.graphql(QUERY, { id });
    expect(q.errors).toBeUndefined();
    expect(q.data!.mobileIdAuthentication).toEqual(late.results[0].data.mobileIdAuthentication);
  });

  it('answers null to the query before any notification arrived', async () => {
    const gw = await gateway();
    const q = await gw.graphql(QUERY, { id: 'never-sent' });
    expect(q.errors).toBeUndefined();
    expect(q.data!.mobileIdAuthentication).toBeNull();
  });

  it('acknowledges a duplicate delivery with 204 and publishes it once', async () => {
    const gw = await gateway();
    const id = `req-${randomUUID()}`;
    const published: unknown[] = [];
    gw.gateway.services.events.bus.subscribe('mobile-id', id, (e) => published.push(e));
    const first = collect(client(gw), SUBSCRIPTION, { id });
    await waitForSubscribers(gw, 'mobile-id', id);

    const n = await sandboxOf(gw).buildNotification({ authReqId: id });
    expect((await postNotification(gw, n.body, { headers: n.headers })).status).toBe(204);
    // The same body again, in the other encoding and with other support headers: still the same notification.
    const form = new URLSearchParams(Object.entries(n.body).map(([k, v]) => [k, String(v)])).toString();
    expect(
      (
        await postNotification(gw, form, {
          contentType: 'application/x-www-form-urlencoded',
          headers: { 'x-mobileid-request-id': 'retry' },
        })
      ).status,
    ).toBe(204);
    expect((await postNotification(gw, n.body)).status).toBe(204);
    await first.done;

    // A subscriber that starts now also gets it once.
    const second = collect(client(gw), SUBSCRIPTION, { id });
    await second.done;

    expect(published).toHaveLength(1);
    expect(first.results).toHaveLength(1);
    expect(second.results).toHaveLength(1);
    expect(await storedEvents(gw, id)).toHaveLength(1);
    // The first delivery's support headers are the ones kept.
    expect(second.results[0].data.mobileIdAuthentication.requestId).toBe(n.headers['x-mobileid-request-id']);
  });

  it('refuses a different second notification for the same auth_req_id with 409 and keeps the first', async () => {
    const gw = await gateway();
    const id = `req-${randomUUID()}`;
    const n = await sandboxOf(gw).buildNotification({ authReqId: id });
    expect((await postNotification(gw, n.body)).status).toBe(204);
    const before = await storedEvents(gw, id);

    const other = await sandboxOf(gw).buildNotification({ authReqId: id, outcome: 'CLIENT_TIMEOUT' });
    const res = await postNotification(gw, other.body);
    expect(res.status).toBe(409);
    expect(res.json).toMatchObject({
      error: 'invalid_request',
      error_description: expect.stringContaining('auth_req_id'),
    });

    expect(await storedEvents(gw, id)).toEqual(before);
    const q = await gw.graphql(QUERY, { id });
    expect(q.data!.mobileIdAuthentication).toMatchObject({
      __typename: 'MobileIdAuthenticated',
      accessToken: n.body.access_token,
    });
  });

  it('accepts a form-encoded notification, with expires_in and leading_kyc_match coerced', async () => {
    const gw = await gateway();
    const id = `req-${randomUUID()}`;
    const n = await sandboxOf(gw).buildNotification({ authReqId: id, expiresIn: 120 });
    const form = new URLSearchParams({
      auth_req_id: id,
      access_token: String(n.body.access_token),
      token_type: 'Bearer',
      id_token: String(n.body.id_token),
      expires_in: '120',
      leading_kyc_match: 'false',
      correlation_id: 'c-42',
      premiuminfo_endpoint: 'https://operator.example/premiuminfo',
    }).toString();
    const res = await postNotification(gw, form, { contentType: 'application/x-www-form-urlencoded; charset=utf-8' });
    expect(res.status).toBe(204);

    const a = (await gw.graphql(QUERY, { id })).data!.mobileIdAuthentication;
    expect(a).toMatchObject({
      __typename: 'MobileIdAuthenticated',
      leadingKycMatch: false,
      correlationId: 'c-42',
      accessToken: n.body.access_token,
    });
    expect(a.otherFields).toEqual({ premiuminfo_endpoint: 'https://operator.example/premiuminfo' });
    const lifetime = Date.parse(a.expiresAt) - Date.parse(a.receivedAt);
    expect(lifetime).toBeGreaterThan(119_000);
    expect(lifetime).toBeLessThan(121_000);
  });

  it('lets a newcomer watch a sandbox authentication arrive with sandboxCompleteMobileIdAuthentication', async () => {
    const gw = await gateway();
    const id = `newcomer-${randomUUID()}`;
    const sub = collect(client(gw), SUBSCRIPTION, { id });
    await waitForSubscribers(gw, 'mobile-id', id);

    const m = await gw.graphql(
      `mutation($id: String!) { sandboxCompleteMobileIdAuthentication(authReqId: $id, outcome: SUCCESS) { authReqId outcome httpStatus accepted response } }`,
      { id },
    );
    expect(m.errors).toBeUndefined();
    expect(m.data!.sandboxCompleteMobileIdAuthentication).toEqual({
      authReqId: id,
      outcome: 'SUCCESS',
      httpStatus: 204,
      accepted: true,
      response: null,
    });
    await sub.done;
    expect(sub.results[0].data.mobileIdAuthentication).toMatchObject({
      __typename: 'MobileIdAuthenticated',
      authReqId: id,
      idTokenVerified: true,
    });
    expect(sub.results[0].data.mobileIdAuthentication.accessToken).toEqual(expect.any(String));

    // A second, different ending of the same authentication is refused by the gateway, and said so.
    const again = await gw.graphql(
      `mutation($id: String!) { sandboxCompleteMobileIdAuthentication(authReqId: $id, outcome: CLIENT_TIMEOUT) { httpStatus accepted response } }`,
      { id },
    );
    expect(again.data!.sandboxCompleteMobileIdAuthentication).toMatchObject({ httpStatus: 409, accepted: false });
  });

  it('ends a waiting subscription cleanly when the client stops it, leaving no listener behind', async () => {
    const gw = await gateway();
    const id = `req-${randomUUID()}`;
    const c = client(gw);
    const sub = collect(c, SUBSCRIPTION, { id });
    await waitForSubscribers(gw, 'mobile-id', id);
    sub.stop();
    await waitFor(() => subscribers(gw, 'mobile-id', id) === 0, 20_000, 'the stopped subscription to leave the bus');
    expect(subscribers(gw, 'mobile-id')).toBe(0);
  });
});
