// A webhook body nested deeper than the gateway walks is a clear 400 that changes nothing, on every webhook.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

const deep = (n: number) => '['.repeat(n) + ']'.repeat(n);
let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway({ SANDBOX_CALLBACK_DELAY_MS: '600000' });
});
afterAll(async () => {
  await gw?.close();
});

async function post(url: string, body: string, headers: Record<string, string> = {}) {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
  const text = await res.text();
  return { status: res.status, json: (text ? JSON.parse(text) : null) as { error: string; error_description: string } };
}

describe('deeply nested webhook bodies', () => {
  it('answers 400 to a verification callback nested 100,000 levels deep, and stores nothing', async () => {
    const reg = await gw.graphql(
      `mutation { registerVerification(input: { workflowId: "wf", applicant: { lastName: "X" } }) { verification { externalId } } }`,
    );
    const id = reg.data!.registerVerification.verification.externalId as string;
    const url = gw.gateway.sandbox.verification!.verifications().find((v) => v.externalId === id)!.callbackUrl!;
    const res = await post(url, `{"status":"COMPLETED","extra":${deep(100_000)}}`);
    expect(res).toEqual({
      status: 400,
      json: { error: 'invalid_request', error_description: 'the body nests deeper than 64 levels' },
    });
    const rows = await gw.gateway.services.store.db
      .selectFrom('events')
      .select('key')
      .where('kind', '=', 'verification')
      .execute();
    expect(rows).toEqual([]);
    // A body within the bound is taken.
    expect((await post(url, `{"status":"COMPLETED","extra":${deep(30)}}`)).status).toBe(204);
  });

  it('answers 400 to a mobile-ID notification nested too deep', async () => {
    const token = gw.gateway.sandbox.mobileId!.notificationToken;
    const res = await post(`${gw.url}/webhooks/mobile-id`, `{"auth_req_id":"deep","extra":${deep(20_000)}}`, {
      authorization: `Bearer ${token}`,
    });
    expect(res.status).toBe(400);
    expect(res.json.error_description).toBe('the body nests deeper than 64 levels');
  });
});
