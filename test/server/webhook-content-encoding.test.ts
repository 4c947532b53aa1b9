// A webhook body sent with a Content-Encoding (gzip, deflate, br) is not the JSON or form fields its Content-Type names
// until decoded, which the gateway does not do: it is refused before a byte is read with 415 saying so, on every
// webhook, and changes nothing (a mobile-ID refusal is kept in the quarantine). A body labelled gzip whose bytes are
// plain text is refused the same way: the header changes what the bytes mean, and is not ignored.
import { gzipSync } from 'node:zlib';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { storeSnapshot } from '../helpers/store.js';

let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway({ SANDBOX_CALLBACK_DELAY_MS: '600000' });
});
afterAll(async () => {
  await gw?.close();
});

async function post(url: string, body: string | Buffer, headers: Record<string, string>) {
  const res = await request(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
  const text = await res.body.text();
  return {
    status: res.statusCode,
    json: (text ? JSON.parse(text) : null) as unknown,
    requestId: res.headers['x-request-id'],
  };
}

async function callbackUrl(): Promise<string> {
  const reg = await gw.graphql(
    `mutation { registerVerification(input: { workflowId: "wf", applicant: { lastName: "X" } }) { verification { externalId } } }`,
  );
  const id = reg.data!.registerVerification.verification.externalId as string;
  return gw.gateway.sandbox.verification!.verifications().find((v) => v.externalId === id)!.callbackUrl!;
}

const failure = (id: string) =>
  JSON.stringify({ auth_req_id: id, error: 'access_denied', error_description: 'client timeout' });

describe('a webhook body with a Content-Encoding', () => {
  const bodies: Array<[string, string, (text: string) => string | Buffer]> = [
    ['gzip', 'gzip', (t) => gzipSync(t)],
    ['a plain body labelled gzip', 'gzip', (t) => t],
    ['deflate, br', 'deflate, br', (t) => t],
  ];

  it.each(bodies)(
    'refuses a mobile-ID notification with %s: 415, nothing stored, quarantined',
    async (_, enc, make) => {
      const before = await storeSnapshot(gw);
      const res = await post(`${gw.url}/webhooks/mobile-id`, make(failure(`enc-${enc}`)), {
        authorization: `Bearer ${gw.gateway.sandbox.mobileId!.notificationToken}`,
        'content-encoding': enc,
      });
      expect(res.status).toBe(415);
      expect(res.json).toEqual({
        error: 'invalid_request',
        error_description: `Content-Encoding ${enc} is not supported: send the body unencoded`,
      });
      expect(await storeSnapshot(gw)).toEqual(before);
      const kept = await gw.graphql('{ mobileIdRejections(first: 50) { gatewayRequestId reason } }');
      expect(kept.data!.mobileIdRejections).toContainEqual({
        gatewayRequestId: res.requestId,
        reason: 'UNSUPPORTED_MEDIA_TYPE',
      });
    },
  );

  it.each(bodies)('refuses a verification callback with %s: 415, nothing stored', async (_, enc, make) => {
    const url = await callbackUrl();
    const before = await storeSnapshot(gw);
    const res = await post(url, make('{"status":"done"}'), { 'content-encoding': enc });
    expect(res.status).toBe(415);
    expect(res.json).toEqual({
      error: 'invalid_request',
      error_description: `Content-Encoding ${enc} is not supported: send the body unencoded`,
    });
    expect(await storeSnapshot(gw)).toEqual(before);
  });

  it('takes Content-Encoding: identity as no encoding', async () => {
    const url = await callbackUrl();
    expect((await post(url, '{"status":"done"}', { 'content-encoding': 'identity' })).status).toBe(204);
  });
});
