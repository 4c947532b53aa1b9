import { Readable } from 'node:stream';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { postNotification, QUERY, storedEvents } from '../helpers/mobile-id.js';

let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway();
});
afterAll(async () => {
  await gw?.close();
});

const build = (authReqId: string, fields: Record<string, unknown> = {}) =>
  gw.gateway.sandbox.mobileId!.buildNotification({ authReqId, fields });

/** Nothing about `authReqId` reached the event log, and the query knows nothing of it. */
async function expectNothingStored(authReqId: string): Promise<void> {
  expect(await storedEvents(gw, authReqId)).toEqual([]);
  expect((await gw.graphql(QUERY, { id: authReqId })).data!.mobileIdAuthentication).toBeNull();
}

describe('the mobile-ID webhook refuses what it must not store', () => {
  it('answers 401 invalid_token to a missing, wrong or non-Bearer token, and stores nothing', async () => {
    const n = await build('auth-401');
    const cases: Array<Record<string, string> | null> = [
      null,
      { authorization: 'Bearer wrong-token' },
      { authorization: `Basic ${gw.gateway.sandbox.mobileId!.notificationToken}` },
    ];
    for (const headers of cases) {
      const res = await postNotification(gw, n.body, { token: null, ...(headers ? { headers } : {}) });
      expect(res.status).toBe(401);
      expect(res.json).toEqual({ error: 'invalid_token', error_description: expect.any(String) });
    }
    await expectNothingStored('auth-401');
  });

  it.each([
    ['bad JSON', async () => '{"auth_req_id": "x",', /not valid JSON/],
    ['a JSON array', async () => [1, 2], /JSON object/],
    [
      'a missing access_token',
      async () => (await build('missing', { access_token: undefined })).body,
      /access_token is required/,
    ],
    [
      'a missing auth_req_id',
      async () => (await build('no-id', { auth_req_id: undefined })).body,
      /auth_req_id is required/,
    ],
    [
      'a token_type other than Bearer',
      async () => (await build('tt', { token_type: 'mac' })).body,
      /token_type must be "Bearer" \(in any case\)/,
    ],
    [
      'an id_token that is not a JWT',
      async () => (await build('nojwt', { id_token: 'not-a-jwt' })).body,
      /id_token is neither a well-formed JWT .* nor an encrypted one/,
    ],
    [
      'an id_token whose parts are not JSON',
      async () => (await build('garbage', { id_token: 'aaaa.bbbb.cccc' })).body,
      /id_token is neither a well-formed JWT/,
    ],
    [
      'a non-integer expires_in',
      async () => (await build('float', { expires_in: 3600.5 })).body,
      /expires_in must be an integer/,
    ],
    [
      'an expires_in given as text that is not a number',
      async () => (await build('text', { expires_in: 'an hour' })).body,
      /expires_in must be an integer/,
    ],
    [
      'a negative expires_in',
      async () => (await build('negative', { expires_in: -1 })).body,
      /expires_in must not be negative/,
    ],
    [
      'a null required field',
      async () => (await build('null-token', { access_token: null })).body,
      /access_token must be a string/,
    ],
    [
      'a failure without error_description',
      async () => ({ auth_req_id: 'fail', error: 'access_denied' }),
      /error_description is required/,
    ],
    [
      'a failure whose error is empty (a form field written empty)',
      async () => ({ auth_req_id: 'fail-empty', error: '', error_description: 'client timeout' }),
      /^error must not be empty$/,
    ],
    [
      'a failure whose error is null',
      async () => ({ auth_req_id: 'fail-null', error: null, error_description: 'client timeout' }),
      /^error must be a string$/,
    ],
    [
      'a failure whose error and error_description are both empty',
      async () => ({ auth_req_id: 'fail-blank', error: '', error_description: '' }),
      /^error must not be empty$/,
    ],
    [
      'error and tokens together',
      async () => ({ ...(await build('both')).body, error: 'access_denied', error_description: 'x' }),
      /not both/,
    ],
  ])(
    'answers 400 invalid_request to %s, naming what is wrong, and stores nothing',
    async (_name, body, description) => {
      const payload = await body();
      const res = await postNotification(gw, payload);
      expect(res.status).toBe(400);
      expect(res.json).toEqual({ error: 'invalid_request', error_description: expect.stringMatching(description) });
      const id = typeof payload === 'object' && payload && 'auth_req_id' in payload ? String(payload.auth_req_id) : 'x';
      await expectNothingStored(id);
      expect(await storedEvents(gw)).toEqual([]);
    },
  );

  it('answers 400 to a form-encoded body whose expires_in is not an integer or whose field repeats', async () => {
    const n = await build('form-bad');
    const fields = Object.fromEntries(Object.entries(n.body).map(([k, v]) => [k, String(v)]));
    const bad = new URLSearchParams({ ...fields, expires_in: '12.5' }).toString();
    const res = await postNotification(gw, bad, { contentType: 'application/x-www-form-urlencoded' });
    expect(res.status).toBe(400);
    expect(res.json.error_description).toMatch(/expires_in must be an integer/);

    const kyc = new URLSearchParams({ ...fields, leading_kyc_match: 'maybe' }).toString();
    const res2 = await postNotification(gw, kyc, { contentType: 'application/x-www-form-urlencoded' });
    expect(res2.status).toBe(400);
    expect(res2.json.error_description).toMatch(/leading_kyc_match must be true or false/);

    const twice = new URLSearchParams(fields).toString() + '&auth_req_id=other';
    const res3 = await postNotification(gw, twice, { contentType: 'application/x-www-form-urlencoded' });
    expect(res3.status).toBe(400);
    expect(res3.json.error_description).toMatch(/auth_req_id is given more than once/);
    await expectNothingStored('form-bad');
  });

  it('never echoes a token value in an error description', async () => {
    const n = await build('echo', { token_type: 'mac' });
    const res = await postNotification(gw, n.body);
    expect(res.status).toBe(400);
    expect(res.text).not.toContain(String(n.body.access_token));
    expect(res.text).not.toContain(String(n.body.id_token));
    // The tokens themselves refused: the description names the field and what is wrong, never the value sent.
    const overlong = `overlong-access-token-${'a'.repeat(16_384)}`;
    const cases: Array<[Record<string, unknown>, RegExp, string]> = [
      [{ id_token: 'secret-id-token-that-is-no-jwt' }, /^id_token is neither a well-formed JWT/, 'secret-id-token'],
      [{ id_token: 'secret.id-token.parts' }, /^id_token is neither a well-formed JWT/, 'secret.id-token'],
      [{ access_token: overlong }, /^access_token must be at most 16384 characters/, 'overlong-access-token'],
    ];
    for (const [fields, description, secret] of cases) {
      const bad = await build(`echo-${secret}`, fields);
      const refused = await postNotification(gw, bad.body);
      expect(refused.status, secret).toBe(400);
      expect(refused.json.error_description, secret).toMatch(description);
      expect(refused.text, secret).not.toContain(secret);
      expect(refused.text, secret).not.toContain(String(bad.body.access_token).slice(0, 32));
    }
  });

  it('answers 413 to a body over 64 KiB, and stores nothing', async () => {
    const n = await build('big', { padding: 'x'.repeat(70 * 1024) });
    const res = await postNotification(gw, n.body);
    expect(res.status).toBe(413);
    expect(res.json).toEqual({ error: 'invalid_request', error_description: expect.stringContaining('65536') });
    await expectNothingStored('big');
  });

  it('answers 413 to an oversized body sent without Content-Length (chunked)', async () => {
    const n = await build('big-chunked', { padding: 'x'.repeat(70 * 1024) });
    const text = JSON.stringify(n.body);
    async function* chunks() {
      for (let i = 0; i < text.length; i += 8192) yield Buffer.from(text.slice(i, i + 8192));
    }
    const res = await request(`${gw.url}/webhooks/mobile-id`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        authorization: `Bearer ${gw.gateway.sandbox.mobileId!.notificationToken}`,
      },
      body: Readable.from(chunks()),
    });
    expect(res.statusCode).toBe(413);
    await res.body.dump();
    await expectNothingStored('big-chunked');
  });

  it('answers 415 to a body that is neither JSON nor form-encoded', async () => {
    const n = await build('xml');
    const res = await postNotification(gw, JSON.stringify(n.body), { contentType: 'text/plain' });
    expect(res.status).toBe(415);
    expect(res.json.error).toBe('invalid_request');
    await expectNothingStored('xml');
  });

  it('never answers with a redirect: other methods and paths get 404/405', async () => {
    const get = await request(`${gw.url}/webhooks/mobile-id`, { method: 'GET' });
    expect(get.statusCode).toBe(405);
    // RFC 9110 §15.5.6: a 405 names the methods the resource takes.
    expect(get.headers.allow).toBe('POST');
    await get.body.dump();
    const slash = await request(`${gw.url}/webhooks/mobile-id/`, { method: 'POST', body: '{}' });
    expect(slash.statusCode).toBe(404);
    await slash.body.dump();
  });
});
