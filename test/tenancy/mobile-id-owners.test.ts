// Mobile-ID results belong to the app whose token carried them: a notification on one app's token never changes
// what another app sees, and the answer to its sender does not depend on another app's notifications. Two named
// API keys over real HTTP, WebSocket (graphql-ws) and SSE (graphql-sse) against the sandbox.
import { randomUUID } from 'node:crypto';
import { createClient as createSseClient, type Client as SseClient } from 'graphql-sse';
import type { Client } from 'graphql-ws';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';

import { ConfigError, loadConfig } from '../../src/config/index.js';
import { gatewaysPerTest, tempDataDir, type TestGateway } from '../helpers/gateway.js';
import { collect, postNotification, QUERY, SUBSCRIPTION, wsClient } from '../helpers/mobile-id.js';
import { subscribers, waitFor } from '../helpers/wait.js';

const SHOP = 'key-shop-0123456789abcdef';
const CRM = 'key-crm-fedcba9876543210';
const KEYS = `shop:${SHOP},crm:${CRM}`;
const ISSUE = `mutation($id: String) { issueMobileIdNotificationToken(authReqId: $id) { token } }`;
const COMPLETE = `mutation($id: String!) { sandboxCompleteMobileIdAuthentication(authReqId: $id, outcome: SUCCESS) { accepted httpStatus } }`;

const start = gatewaysPerTest();
const disposers: Array<() => void | Promise<void>> = [];
afterEach(async () => {
  for (const d of disposers.splice(0)) await d();
});

async function issue(gw: TestGateway, key: string, authReqId: string | null = null): Promise<string> {
  const res = await gw.graphql(ISSUE, { id: authReqId }, { key });
  expect(res.errors).toBeUndefined();
  return res.data!.issueMobileIdNotificationToken.token as string;
}

async function read(gw: TestGateway, key: string, authReqId: string): Promise<any> {
  const res = await gw.graphql(QUERY, { id: authReqId }, { key });
  expect(res.errors).toBeUndefined();
  return res.data!.mobileIdAuthentication;
}

const failure = (authReqId: string, description = 'the user refused') => ({
  auth_req_id: authReqId,
  error: 'access_denied',
  error_description: description,
});

function sse(gw: TestGateway, key: string): SseClient {
  const client = createSseClient({
    url: `${gw.url}/graphql/stream`,
    headers: { authorization: `Bearer ${key}` },
    retryAttempts: 0,
  });
  disposers.push(() => client.dispose());
  return client;
}

function ws(gw: TestGateway, key: string): Client {
  const client = wsClient(gw, { key });
  disposers.push(() => client.dispose());
  return client;
}

describe('mobile-ID results belong to the app whose token carried them', () => {
  it("a notification on another app's token for an app's auth_req_id changes nothing that app sees, over HTTP, WebSocket and SSE, and the app's own notification is still accepted", async () => {
    const gw = await start({ GATEWAY_API_KEYS: KEYS });
    const authReqId = `auth-${randomUUID()}`;
    const shopToken = await issue(gw, SHOP, authReqId);

    // The shop waits for its result over WebSocket and SSE.
    const overWs = collect(ws(gw, SHOP), SUBSCRIPTION, { id: authReqId });
    const overSse: any[] = [];
    sse(gw, SHOP).subscribe(
      { query: SUBSCRIPTION, variables: { id: authReqId } },
      { next: (v) => overSse.push(v), error: () => {}, complete: () => {} },
    );
    await waitFor(() => subscribers(gw, 'mobile-id', authReqId) === 2);

    // The CRM app issues itself a token for any auth_req_id and posts a failure for the shop's.
    const crmToken = await issue(gw, CRM);
    expect((await postNotification(gw, failure(authReqId), { token: crmToken })).status).toBe(204);
    expect(await read(gw, SHOP, authReqId)).toBeNull();
    expect(overWs.results).toEqual([]);
    expect(overSse).toEqual([]);

    // The shop's genuine notification is accepted (not 409), and it is what the shop reads and receives.
    const genuine = await gw.gateway.sandbox.mobileId!.buildNotification({ authReqId });
    expect((await postNotification(gw, genuine.body, { token: shopToken })).status).toBe(204);
    await waitFor(() => overWs.results.length === 1 && overSse.length === 1);
    for (const result of [overWs.results[0], overSse[0]]) {
      expect(result.data.mobileIdAuthentication).toMatchObject({
        __typename: 'MobileIdAuthenticated',
        authReqId,
        accessToken: genuine.body.access_token,
      });
    }
    expect(await read(gw, SHOP, authReqId)).toMatchObject({
      __typename: 'MobileIdAuthenticated',
      accessToken: genuine.body.access_token,
    });
    // The CRM app reads what it posted itself, and nothing of the shop's.
    expect(await read(gw, CRM, authReqId)).toMatchObject({
      __typename: 'MobileIdAuthenticationFailed',
      errorDescription: 'the user refused',
    });
  });

  it("the answer to a sender is the same whether or not another app's authentication has ended", async () => {
    const gw = await start({ GATEWAY_API_KEYS: KEYS });
    const ended = `auth-${randomUUID()}`;
    const unknown = `auth-${randomUUID()}`;
    expect(
      (await gw.graphql(COMPLETE, { id: ended }, { key: SHOP })).data!.sandboxCompleteMobileIdAuthentication,
    ).toEqual({ accepted: true, httpStatus: 204 });

    const crmToken = await issue(gw, CRM);
    const answers = async (authReqId: string) => [
      (await postNotification(gw, failure(authReqId), { token: crmToken })).status,
      (await postNotification(gw, failure(authReqId), { token: crmToken })).status,
      (await postNotification(gw, failure(authReqId, 'another text'), { token: crmToken })).status,
    ];
    // First delivery, its repeat, then another notification: decided among the CRM app's own notifications only.
    expect(await answers(ended)).toEqual([204, 204, 409]);
    expect(await answers(unknown)).toEqual([204, 204, 409]);
    expect(await read(gw, SHOP, ended)).toMatchObject({ __typename: 'MobileIdAuthenticated' });
  });

  it("the sandbox trigger posts on a token issued for the caller: its result is that app's alone", async () => {
    const gw = await start({ GATEWAY_API_KEYS: KEYS });
    const authReqId = `auth-${randomUUID()}`;
    expect(
      (await gw.graphql(COMPLETE, { id: authReqId }, { key: CRM })).data!.sandboxCompleteMobileIdAuthentication
        .accepted,
    ).toBe(true);
    expect(await read(gw, CRM, authReqId)).toMatchObject({ __typename: 'MobileIdAuthenticated', authReqId });
    expect(await read(gw, SHOP, authReqId)).toBeNull();
  });
});

describe("the sandbox's notification token", () => {
  it('is a random secret of each data directory, the same after a restart, and the old published constant is refused', async () => {
    const dataDir = tempDataDir();
    const first = await start({ DATA_DIR: dataDir });
    const token = first.gateway.sandbox.mobileId!.notificationToken;
    const other = await start({});
    expect(other.gateway.sandbox.mobileId!.notificationToken).not.toBe(token);
    expect(token).toMatch(/^sandbox-[0-9a-f]{32}$/);

    const published = await postNotification(first, failure(`auth-${randomUUID()}`), {
      token: 'sandbox-mobileid-notification-token',
    });
    expect(published.status).toBe(401);
    expect((await postNotification(first, failure(`auth-${randomUUID()}`), { token })).status).toBe(204);
    await first.close();

    const again = await start({ DATA_DIR: dataDir });
    expect(again.gateway.sandbox.mobileId!.notificationToken).toBe(token);
  });

  it("GraphiQL's sandbox tab shows it while the API is open, and only says where it is once API keys are required", async () => {
    const page = async (gw: TestGateway) =>
      (await request(`${gw.url}/graphql`, { headers: { accept: 'text/html' } })).body.text();
    const open = await start({});
    const openToken = open.gateway.sandbox.mobileId!.notificationToken;
    expect(await page(open)).toContain(openToken);

    const keyed = await start({ GATEWAY_API_KEYS: KEYS });
    const html = await page(keyed);
    expect(html).toContain('Trigger the mobile-ID result (sandbox)');
    expect(html).not.toContain(keyed.gateway.sandbox.mobileId!.notificationToken);
    expect(html).toContain('start-up line');
  });
});

describe('configured notification tokens (MOBILEID_NOTIFICATION_TOKENS)', () => {
  const env = (tokens: string) => ({
    GATEWAY_API_KEYS: KEYS,
    MOBILEID_NOTIFICATION_TOKENS: tokens,
    SANDBOX_UPSTREAMS: 'cloud,identification,verification,rfm',
  });

  it("a token bound to an app (<app>:<token>) carries results only that app reads; a bare token's results every app reads", async () => {
    const gw = await start(env('shop:bound-token-for-the-shop,shared-token-of-the-operator'));
    const bound = `auth-${randomUUID()}`;
    const shared = `auth-${randomUUID()}`;
    expect((await postNotification(gw, failure(bound), { token: 'bound-token-for-the-shop' })).status).toBe(204);
    expect((await postNotification(gw, failure(shared), { token: 'shared-token-of-the-operator' })).status).toBe(204);

    expect(await read(gw, SHOP, bound)).toMatchObject({ authReqId: bound });
    expect(await read(gw, CRM, bound)).toBeNull();
    expect(await read(gw, SHOP, shared)).toMatchObject({ authReqId: shared });
    expect(await read(gw, CRM, shared)).toMatchObject({ authReqId: shared });
    // The binding's token is the part after `shop:`; the whole entry is not a token.
    expect(
      (await postNotification(gw, failure(`auth-${randomUUID()}`), { token: 'shop:bound-token-for-the-shop' })).status,
    ).toBe(401);
  });

  it('a binding to an app no API key names stops start-up, naming the variable and not the token', () => {
    const attempt = () => loadConfig(env('shpo:a-secret-token-value'));
    expect(attempt).toThrow(ConfigError);
    expect(attempt).toThrow(/MOBILEID_NOTIFICATION_TOKENS.*"shpo".*crm, shop/);
    try {
      attempt();
    } catch (err) {
      expect(String(err)).not.toContain('a-secret-token-value');
    }
  });
});
