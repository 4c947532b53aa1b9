// A JSON webhook body that starts with a UTF-8 byte order mark (RFC 8259 §8.1: a parser may ignore it) is read as the
// JSON after it: the mobile identity service does not retry, so a notification refused for how it was written is a
// lost authentication. The mark changes nothing of what is kept: the same body without it is an exact repeat.
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { postNotification, QUERY, storedEvents } from '../helpers/mobile-id.js';

let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway({ SANDBOX_CALLBACK_DELAY_MS: '600000' });
});
afterAll(async () => {
  await gw?.close();
});

const BOM = '\uFEFF';

describe('a JSON webhook body with a byte order mark', () => {
  it('is a mobile-ID notification like the same body without it, and its repeat without it a duplicate', async () => {
    const body = JSON.stringify({ auth_req_id: 'bom-1', error: 'access_denied', error_description: 'client timeout' });
    const res = await postNotification(gw, BOM + body);
    expect(res.status, res.text).toBe(204);
    expect((await postNotification(gw, body)).status).toBe(204);
    expect(await storedEvents(gw, 'bom-1')).toHaveLength(1);
    const read = await gw.graphql(QUERY, { id: 'bom-1' });
    expect(read.data!.mobileIdAuthentication).toMatchObject({ authReqId: 'bom-1', error: 'access_denied' });
  });

  it('is a verification callback like the same body without it', async () => {
    const reg = await gw.graphql(
      `mutation { registerVerification(input: { workflowId: "wf", applicant: { lastName: "X" } }) { verification { externalId } } }`,
    );
    const id = reg.data!.registerVerification.verification.externalId as string;
    const url = gw.gateway.sandbox.verification!.verifications().find((v) => v.externalId === id)!.callbackUrl!;
    const res = await request(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: BOM + JSON.stringify({ status: 'done' }),
    });
    expect(res.statusCode, await res.body.text()).toBe(204);
  });

  it('is still refused when the mark is not at the start', async () => {
    const res = await postNotification(gw, ` ${BOM}{"auth_req_id":"bom-2","error":"e","error_description":"d"}`);
    expect(res.status).toBe(400);
    expect(res.json).toEqual({ error: 'invalid_request', error_description: 'the body is not valid JSON' });
  });
});
