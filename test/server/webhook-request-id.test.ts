// Every answer of the mobile-ID webhook carries X-Request-Id, as every other answer of the gateway does: the sender's
// own when it is sane, a fresh UUID otherwise. The route writes it with its answer's headers, in one call
// (src/server/http.ts `writesRequestId`), rather than having the handler set it beforehand.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { postNotification } from '../helpers/mobile-id.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway();
});
afterAll(async () => {
  await gw?.close();
});

/** A failure notification (no id_token needed) for a fresh auth_req_id. */
const failure = (authReqId = randomUUID()) => ({
  auth_req_id: authReqId,
  error: 'access_denied',
  error_description: 'Client timeout',
});

describe('X-Request-Id on the mobile-ID webhook', () => {
  it('echoes a sane X-Request-Id on a 204, a duplicate and a refusal, each once', async () => {
    const body = failure();
    const cases = [
      { body, status: 204 },
      { body, status: 204 },
      { body: { ...body, error_description: 'another one' }, status: 409 },
      { body: { error: 'access_denied' }, status: 400 },
    ];
    for (const [i, c] of cases.entries()) {
      const id = `sender-${i}:a.b`;
      const res = await postNotification(gw, c.body, { headers: { 'x-request-id': id } });
      expect(res.status).toBe(c.status);
      expect(res.headers['x-request-id']).toBe(id);
      expect(res.headers['cache-control']).toBe('no-store');
    }
  });

  it('gives a fresh UUID when none is sent or the one sent is not sane, on every kind of answer', async () => {
    const answers = [
      await postNotification(gw, failure()),
      await postNotification(gw, failure(), { headers: { 'x-request-id': 'has spaces in it' } }),
      await postNotification(gw, failure(), { token: null }),
      await postNotification(gw, failure(), { token: 'not-a-token' }),
      await postNotification(gw, 'auth_req_id=x', { contentType: 'text/plain' }),
      await postNotification(gw, '{not json'),
    ];
    expect(answers.map((a) => a.status)).toEqual([204, 204, 401, 401, 415, 400]);
    const ids = answers.map((a) => a.headers['x-request-id']);
    for (const id of ids) expect(id).toMatch(UUID);
    expect(new Set(ids).size).toBe(ids.length);
    // A refusal that drops the connection still names its request.
    expect(answers[2]!.headers.connection).toBe('close');
  });

  it('names the request id in a 500 that a failing route answers', async () => {
    const original = gw.gateway.services.events.log.append.bind(gw.gateway.services.events.log);
    gw.gateway.services.events.log.append = () => Promise.reject(new Error('a fault planted by the test'));
    try {
      const res = await postNotification(gw, failure(), { headers: { 'x-request-id': 'the-500' } });
      expect(res.status).toBe(500);
      expect(res.headers['x-request-id']).toBe('the-500');
      expect(res.json).toEqual({
        error: 'server_error',
        error_description: 'internal error; see the gateway log for request the-500',
      });
    } finally {
      gw.gateway.services.events.log.append = original;
    }
  });
});
