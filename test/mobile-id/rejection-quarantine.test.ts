import { createHash } from 'node:crypto';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';

import { loadConfig } from '../../src/config/index.js';
import { gatewaysPerTest, type TestGateway } from '../helpers/gateway.js';
import { postNotification } from '../helpers/mobile-id.js';

// The sender does not retry, so every refused notification is kept, without secrets, for operators
// (docs/decisions/016-id-token-checks-and-quarantine.md). test/mobile-id/notification-rejections.test.ts
// checks the answers themselves; this file checks what an operator can see of them afterwards.

const gateway = gatewaysPerTest();
const REJECTIONS = `query($id: String, $first: Int) {
  mobileIdRejections(authReqId: $id, first: $first) { id receivedAt authReqId httpStatus error reason description requestId transactionId gatewayRequestId }
}`;
const ISSUE = `mutation($id: String) { issueMobileIdNotificationToken(authReqId: $id) { token } }`;

async function rejections(gw: TestGateway, variables: Record<string, unknown> = {}, key?: string) {
  const res = await gw.graphql(REJECTIONS, variables, key ? { key } : {});
  expect(res.errors, JSON.stringify(res.errors)).toBeUndefined();
  return res.data!.mobileIdRejections as Array<Record<string, any>>;
}

async function metric(gw: TestGateway, reason: string): Promise<number> {
  const text = await (await request(`${gw.url}/metrics`)).body.text();
  const m = new RegExp(`^gateway_mobile_id_rejections_total\\{reason="${reason}"\\} (\\d+)`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
}

describe('the quarantine of refused mobile-ID notifications', () => {
  it('keeps every kind of refusal with when, why, the auth_req_id and the support references, newest first, and counts it by reason', async () => {
    const gw = await gateway();
    const sb = gw.gateway.sandbox.mobileId!;
    const support = { 'x-mobileid-request-id': 'req-77', 'x-mobileid-transaction-id': 'tx-77' };
    const before = Date.now();

    expect(
      (
        await postNotification(gw, (await sb.buildNotification({ authReqId: 'q-401' })).body, {
          token: 'wrong',
          headers: support,
        })
      ).status,
    ).toBe(401);
    expect((await postNotification(gw, 'x', { contentType: 'text/plain', headers: support })).status).toBe(415);
    expect(
      (await postNotification(gw, { auth_req_id: 'q-big', pad: 'x'.repeat(70 * 1024) }, { headers: support })).status,
    ).toBe(413);
    expect(
      (await postNotification(gw, { auth_req_id: 'q-400', error: 'access_denied' }, { headers: support })).status,
    ).toBe(400);
    const first = await sb.buildNotification({ authReqId: 'q-409' });
    expect((await postNotification(gw, first.body)).status).toBe(204);
    const second = await sb.buildNotification({ authReqId: 'q-409', outcome: 'CLIENT_TIMEOUT' });
    expect((await postNotification(gw, second.body, { headers: support })).status).toBe(409);

    const rows = await rejections(gw);
    expect(rows.map((r) => [r.httpStatus, r.reason, r.authReqId])).toEqual([
      [409, 'CONFLICT', 'q-409'],
      [400, 'MALFORMED', 'q-400'],
      [413, 'BODY_TOO_LARGE', null],
      [415, 'UNSUPPORTED_MEDIA_TYPE', null],
      [401, 'UNAUTHORIZED', null],
    ]);
    for (const r of rows) {
      expect(r).toMatchObject({
        requestId: 'req-77',
        transactionId: 'tx-77',
        error: expect.stringMatching(/^invalid_(request|token)$/),
      });
      expect(Date.parse(r.receivedAt)).toBeGreaterThanOrEqual(before - 1000);
      expect(r.description).toEqual(expect.any(String));
      expect(r.gatewayRequestId).toEqual(expect.any(String));
    }
    expect(rows.find((r) => r.reason === 'MALFORMED')!.description).toMatch(/error_description is required/);
    for (const reason of ['CONFLICT', 'MALFORMED', 'BODY_TOO_LARGE', 'UNSUPPORTED_MEDIA_TYPE', 'UNAUTHORIZED'])
      expect(await metric(gw, reason)).toBe(1);
    expect(await rejections(gw, { id: 'q-400' })).toHaveLength(1);
    expect(await rejections(gw, { first: 2 })).toHaveLength(2);
  });

  it('keeps a notification acknowledged while the JWKS could not be loaded, and still unverifiable at EVENT_RETENTION', async () => {
    const gw = await gateway({
      GATEWAY_API_KEYS: 'app',
      OPERATOR_API_KEYS: 'ops',
      SANDBOX_UPSTREAMS: 'cloud,identification,verification,rfm',
      MOBILEID_NOTIFICATION_TOKENS: 'notify',
      MOBILEID_JWKS_URL: 'http://127.0.0.1:1/jwks',
      MOBILEID_ISSUER: 'https://op.example',
      MOBILEID_CLIENT_ID: 'sp',
    });
    const jwt = `${Buffer.from('{"alg":"ES256"}').toString('base64url')}.${Buffer.from('{"sub":"s"}').toString('base64url')}.c2ln`;
    const res = await postNotification(
      gw,
      { auth_req_id: 'q-503', access_token: 'a', token_type: 'Bearer', id_token: jwt, expires_in: 60 },
      { token: 'notify' },
    );
    expect(res.status).toBe(204);
    expect(await rejections(gw, {}, 'ops')).toEqual([]);
    await gw.gateway.services.mobileId.verifyPending(Date.now() + 400 * 86_400_000);
    expect(await rejections(gw, {}, 'ops')).toMatchObject([
      { authReqId: 'q-503', httpStatus: 204, reason: 'JWKS_UNAVAILABLE', error: 'temporarily_unavailable' },
    ]);
    expect(await metric(gw, 'JWKS_UNAVAILABLE')).toBe(1);
  });

  it('keeps at most 100 unauthenticated refusals a minute, counts every one, and still keeps the authenticated ones', async () => {
    const gw = await gateway();
    const body = { auth_req_id: 'flood' };
    for (let i = 0; i < 105; i++) expect((await postNotification(gw, body, { token: `forged-${i}` })).status).toBe(401);
    expect((await postNotification(gw, { auth_req_id: 'real-but-bad', error: 'access_denied' })).status).toBe(400);
    const res = await gw.graphql(`{ mobileIdRejections(first: 200) { authReqId reason } }`);
    expect(res.errors, JSON.stringify(res.errors)).toBeUndefined();
    const rows = res.data!.mobileIdRejections as Array<{ authReqId: string | null; reason: string }>;
    expect(rows.filter((r) => r.reason === 'UNAUTHORIZED')).toHaveLength(100);
    expect(rows[0]).toMatchObject({ authReqId: 'real-but-bad', reason: 'MALFORMED' });
    expect(await metric(gw, 'UNAUTHORIZED')).toBe(105);
  });

  it('holds no secret of a refused notification: no token, no id_token, no body', async () => {
    const gw = await gateway();
    const n = await gw.gateway.sandbox.mobileId!.buildNotification({
      authReqId: 'q-secret',
      fields: { token_type: 'mac', refresh_token: 'refresh-secret-value' },
    });
    expect((await postNotification(gw, n.body)).status).toBe(400);
    // Refused for the tokens themselves: an id_token that is no JWT, an access token over its bound.
    const badIdToken = await gw.gateway.sandbox.mobileId!.buildNotification({
      authReqId: 'q-secret-id-token',
      fields: { id_token: 'id-token-secret-that-is-no-jwt' },
    });
    expect((await postNotification(gw, badIdToken.body)).status).toBe(400);
    const overlong = `access-token-secret-${'a'.repeat(16_384)}`;
    const badAccessToken = await gw.gateway.sandbox.mobileId!.buildNotification({
      authReqId: 'q-secret-access-token',
      fields: { access_token: overlong },
    });
    expect((await postNotification(gw, badAccessToken.body)).status).toBe(400);
    const rows = await gw.gateway.services.store.db.selectFrom('mobile_id_rejections').selectAll().execute();
    expect(rows).toHaveLength(3);
    const text = JSON.stringify(rows) + JSON.stringify(await rejections(gw));
    for (const secret of [
      n.body.access_token,
      n.body.id_token,
      'refresh-secret-value',
      gw.gateway.sandbox.mobileId!.notificationToken,
      'id-token-secret',
      badIdToken.body.access_token,
      'access-token-secret',
    ]) {
      expect(text).not.toContain(String(secret));
    }
    expect(text).not.toContain(createHash('sha256').update(String(n.body.access_token)).digest('hex'));
  });
});

describe('who may read the quarantine', () => {
  const env = { GATEWAY_API_KEYS: 'app-a,app-b', OPERATOR_API_KEYS: 'ops-key' };

  it('an operator key reads every refusal; an app key only those of notifications on tokens it issued', async () => {
    const gw = await gateway(env);
    const sb = gw.gateway.sandbox.mobileId!;
    const issued = (await gw.graphql(ISSUE, { id: 'mine' }, { key: 'app-a' })).data!.issueMobileIdNotificationToken
      .token;
    // Refused after authentication with app-a's token: app-a's to read.
    const bad = await sb.buildNotification({ authReqId: 'mine', fields: { token_type: 'mac' } });
    expect((await postNotification(gw, bad.body, { token: issued })).status).toBe(400);
    // Refused with the operator's (sandbox) token and without a valid token: operator data only.
    expect(
      (
        await postNotification(
          gw,
          (await sb.buildNotification({ authReqId: 'ops-only', fields: { token_type: 'mac' } })).body,
        )
      ).status,
    ).toBe(400);
    expect(
      (
        await postNotification(gw, (await sb.buildNotification({ authReqId: 'forged' })).body, {
          token: 'forged-token',
        })
      ).status,
    ).toBe(401);

    expect((await rejections(gw, {}, 'ops-key')).map((r) => r.reason)).toEqual([
      'UNAUTHORIZED',
      'MALFORMED',
      'MALFORMED',
    ]);
    expect((await rejections(gw, {}, 'app-a')).map((r) => r.authReqId)).toEqual(['mine']);
    expect(await rejections(gw, {}, 'app-b')).toEqual([]);
    expect(await rejections(gw, { id: 'ops-only' }, 'app-a')).toEqual([]);
  });

  it('an operator key works as an API key for everything else; no key reads nothing', async () => {
    const gw = await gateway(env);
    const res = await gw.graphql(`{ catalog { instanceTypes { __typename } } }`, {}, { key: 'ops-key' });
    expect(res.errors).toBeUndefined();
    const anonymous = await gw.graphql(REJECTIONS, {});
    expect(anonymous.errors![0]!.extensions!.code).toBe('UNAUTHENTICATED');
  });

  it('refuses OPERATOR_API_KEYS without GATEWAY_API_KEYS at start-up', () => {
    expect(() => loadConfig({ OPERATOR_API_KEYS: 'ops' })).toThrow(/OPERATOR_API_KEYS: needs GATEWAY_API_KEYS/);
  });

  it('refuses a page size below 1 with BAD_USER_INPUT (test/graphql/page-sizes.test.ts: every list)', async () => {
    const gw = await gateway();
    const res = await gw.graphql(REJECTIONS, { first: 0 });
    expect(res.errors![0]!.extensions).toMatchObject({ code: 'BAD_USER_INPUT', field: 'first' });
  });
});
