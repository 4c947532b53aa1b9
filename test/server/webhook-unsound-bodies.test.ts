// A webhook body that parses but cannot be stored as it came is a clear 400 that changes nothing, on every webhook:
// bytes that are not UTF-8 (decoded, each would be U+FFFD, and two identifiers one), a lone surrogate (`"\ud800"`,
// legal JSON text, which SQLite keeps as U+FFFD too), a number JSON cannot hold (`1e999` parses as Infinity, which the
// duplicate check's canonical JSON cannot write), and form fields whose percent-encoded bytes are not UTF-8.
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { QUERY, storedEvents } from '../helpers/mobile-id.js';
import { storeSnapshot } from '../helpers/store.js';

let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway({ SANDBOX_CALLBACK_DELAY_MS: '600000' });
});
afterAll(async () => {
  await gw?.close();
});

async function post(url: string, body: string | Buffer, type = 'application/json', auth?: string) {
  const res = await request(url, {
    method: 'POST',
    headers: { 'content-type': type, ...(auth ? { authorization: `Bearer ${auth}` } : {}) },
    body,
  });
  const text = await res.body.text();
  return { status: res.statusCode, text, requestId: res.headers['x-request-id'] };
}

const notify = (body: string | Buffer, type?: string) =>
  post(`${gw.url}/webhooks/mobile-id`, body, type, gw.gateway.sandbox.mobileId!.notificationToken);

/** A failure notification's JSON with `id` as its auth_req_id's bytes and `extra` before its closing brace. */
const failure = (id: Buffer | string, extra = '') =>
  Buffer.concat([
    Buffer.from('{"auth_req_id":"'),
    Buffer.isBuffer(id) ? id : Buffer.from(id),
    Buffer.from(`","error":"access_denied","error_description":"client timeout"${extra}}`),
  ]);

/** A verification's callback address (the sandbox does not call it itself: SANDBOX_CALLBACK_DELAY_MS). */
async function callbackUrl(): Promise<string> {
  const reg = await gw.graphql(
    `mutation { registerVerification(input: { workflowId: "wf", applicant: { lastName: "X" } }) { verification { externalId } } }`,
  );
  const id = reg.data!.registerVerification.verification.externalId as string;
  return gw.gateway.sandbox.verification!.verifications().find((v) => v.externalId === id)!.callbackUrl!;
}

const refusal = (description: string) => JSON.stringify({ error: 'invalid_request', error_description: description });

describe('webhook bodies that cannot be stored as they came', () => {
  const cases: Array<[string, Buffer | string, string]> = [
    ['bytes that are not UTF-8', failure(Buffer.from([0x69, 0x64, 0xff])), 'the body is not valid UTF-8 text'],
    ['a lone surrogate in a value', failure('id-\\ud800-lone'), 'a string in the body is not valid Unicode text'],
    [
      'a lone surrogate in a name',
      failure('id-name', ',"vendor_\\udc00":1'),
      'a name in the body is not valid Unicode text',
    ],
    ['1e999', failure('id-inf', ',"vendor_score":1e999'), 'a number in the body is out of range'],
    ['-1e999 in an array', failure('id-minus-inf', ',"scores":[1,-1e999]'), 'a number in the body is out of range'],
  ];

  it.each(cases)(
    'refuses a mobile-ID notification with %s: 400, nothing stored, kept in the quarantine',
    async (_, body, why) => {
      const before = await storeSnapshot(gw);
      const res = await notify(body);
      expect(res.status, res.text).toBe(400);
      expect(res.text).toBe(refusal(why));
      expect(res.requestId).toBeTruthy();
      expect(await storeSnapshot(gw)).toEqual(before);
      const kept = await gw.graphql('{ mobileIdRejections(first: 50) { gatewayRequestId reason } }');
      expect(kept.data!.mobileIdRejections).toContainEqual({ gatewayRequestId: res.requestId, reason: 'MALFORMED' });
    },
  );

  it('keeps two notifications whose identifiers differ only in bytes that are not UTF-8 from being taken as one', async () => {
    expect((await notify(failure(Buffer.from([0x69, 0x64, 0xfe])))).status).toBe(400);
    expect((await notify(failure(Buffer.from([0x69, 0x64, 0xfd])))).status).toBe(400);
    expect(await storedEvents(gw, 'id\ufffd')).toEqual([]);
  });

  it.each(cases)('refuses a verification callback with %s: 400, nothing stored', async (_, body, why) => {
    const url = await callbackUrl();
    const before = await storeSnapshot(gw);
    const res = await post(url, body);
    expect(res.status, res.text).toBe(400);
    expect(res.text).toBe(refusal(why));
    expect(await storeSnapshot(gw)).toEqual(before);
  });

  it('refuses form fields whose percent-encoded bytes are not UTF-8', async () => {
    const url = await callbackUrl();
    const before = await storeSnapshot(gw);
    const res = await post(url, 'status=COMPLETED&note=%FF', 'application/x-www-form-urlencoded');
    expect(res.status, res.text).toBe(400);
    expect(res.text).toBe(refusal('a form field is not valid UTF-8 once decoded'));
    expect(await storeSnapshot(gw)).toEqual(before);
  });

  it.each([
    ['a value', 'status=COMPLETED&note=a%00b'],
    ['a name', 'status=COMPLETED&no%00te=1'],
  ])('refuses form fields with an encoded NUL character in %s, as JSON bodies with it are', async (_, body) => {
    const url = await callbackUrl();
    const before = await storeSnapshot(gw);
    const res = await post(url, body, 'application/x-www-form-urlencoded');
    expect(res.status, res.text).toBe(400);
    expect(res.text).toBe(refusal('a form field holds the NUL character (U+0000)'));
    expect(await storeSnapshot(gw)).toEqual(before);
    const form = 'auth_req_id=nul%00id&error=access_denied&error_description=d';
    const notified = await notify(form, 'application/x-www-form-urlencoded');
    expect(notified.status, notified.text).toBe(400);
    expect(await storeSnapshot(gw)).toEqual(before);
  });

  it('takes what only looks alike: U+FFFD itself, encoded or not, a surrogate pair, large finite numbers', async () => {
    const url = await callbackUrl();
    expect(
      (await post(url, 'status=COMPLETED&note=%EF%BF%BD+\ufffd', 'application/x-www-form-urlencoded')).status,
    ).toBe(204);
    const id = 'id-\ufffd-\ud83d\ude00';
    const res = await notify(failure(id, ',"vendor_score":1e308,"small":-1e-320'));
    expect(res.status, res.text).toBe(204);
    const read = await gw.graphql(QUERY, { id });
    expect(read.errors).toBeUndefined();
    expect(read.data!.mobileIdAuthentication).toMatchObject({ authReqId: id });
  });
});
