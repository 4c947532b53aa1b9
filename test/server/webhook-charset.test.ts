// A webhook body sent in a charset its Content-Type declares (`charset=windows-1251`, `utf-16le`, `iso-8859-1`) is
// read in that charset, JSON and form fields alike: the senders do not retry a 400, so refusing a body whose bytes say
// exactly how to read them would lose the result. Read, it is the same body as the same text in UTF-8: a repeat in the
// other charset is a duplicate. A charset the gateway cannot read is a 415, bytes invalid in the declared one a 400,
// both naming the charset, and neither stores anything.
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { QUERY, storedEvents } from '../helpers/mobile-id.js';

let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway({ SANDBOX_CALLBACK_DELAY_MS: '600000' });
});
afterAll(async () => {
  await gw?.close();
});

/** A single-byte charset's encoder, from its WHATWG decoder (Node has no encoder but UTF-8). */
function singleByte(label: string): (text: string) => Buffer {
  const decoder = new TextDecoder(label);
  const bytes = new Map<string, number>();
  for (let b = 0; b < 256; b++) bytes.set(decoder.decode(Uint8Array.of(b)), b);
  return (text) =>
    Buffer.from(
      [...text].map((c) => {
        const b = bytes.get(c);
        if (b === undefined) throw new Error(`${c} is not in ${label}`);
        return b;
      }),
    );
}
const cp1251 = singleByte('windows-1251');
const latin1 = singleByte('iso-8859-1');

async function post(url: string, body: string | Buffer, type: string, auth?: string) {
  const res = await request(url, {
    method: 'POST',
    headers: { 'content-type': type, ...(auth ? { authorization: `Bearer ${auth}` } : {}) },
    body,
  });
  const text = await res.body.text();
  return { status: res.statusCode, json: text ? (JSON.parse(text) as Record<string, unknown>) : null };
}

const notify = (body: string | Buffer, type: string) =>
  post(`${gw.url}/webhooks/mobile-id`, body, type, gw.gateway.sandbox.mobileId!.notificationToken);

/** A verification and its callback address (the sandbox does not call it itself: SANDBOX_CALLBACK_DELAY_MS). */
async function verification(): Promise<{ id: string; url: string }> {
  const reg = await gw.graphql(
    `mutation { registerVerification(input: { workflowId: "wf", applicant: { lastName: "X" } }) { verification { externalId } } }`,
  );
  const id = reg.data!.registerVerification.verification.externalId as string;
  return { id, url: gw.gateway.sandbox.verification!.verifications().find((v) => v.externalId === id)!.callbackUrl! };
}

async function completion(id: string): Promise<{ status: string | null; payload: Record<string, unknown> }> {
  const read = await gw.graphql(
    `query($id: ID!) { node(id: $id) { ... on Verification { completion { status payload } } } }`,
    { id },
  );
  expect(read.errors).toBeUndefined();
  return read.data!.node.completion;
}

async function events(): Promise<number> {
  const q = gw.gateway.services.store.db.selectFrom('events').select((eb) => eb.fn.countAll<number>().as('n'));
  return Number((await q.executeTakeFirstOrThrow()).n);
}

const NAME = { lastName: 'Иванов', firstName: 'Пётр', middleName: 'Ёлкин' };

describe('a verification callback in a declared charset', () => {
  it('is read in windows-1251, and the same body in UTF-8 is its duplicate', async () => {
    const v = await verification();
    const body = JSON.stringify({ status: 'COMPLETED', applicant: NAME });
    const before = await events();
    const res = await post(v.url, cp1251(body), 'application/json; charset=windows-1251');
    expect(res.status, JSON.stringify(res.json)).toBe(204);
    expect(await completion(v.id)).toMatchObject({ status: 'COMPLETED', payload: { applicant: NAME } });
    expect((await post(v.url, body, 'application/json; charset=utf-8')).status).toBe(204);
    expect(await events()).toBe(before + 1);
  });

  it('is read in UTF-16 (its byte order mark dropped) and in ISO-8859-1, the label quoted or in any case', async () => {
    const v = await verification();
    const utf16 = Buffer.concat([
      Buffer.from([0xff, 0xfe]),
      Buffer.from(JSON.stringify({ status: 'S1', ...NAME }), 'utf16le'),
    ]);
    expect((await post(v.url, utf16, 'application/json; Charset="UTF-16LE"')).status).toBe(204);
    expect(await completion(v.id)).toMatchObject({ status: 'S1', payload: NAME });
    const latin = JSON.stringify({ status: 'S2', lastName: 'Müller-Lüdenscheidt' });
    expect((await post(v.url, latin1(latin), 'application/json;charset=ISO-8859-1')).status).toBe(204);
    expect(await completion(v.id)).toMatchObject({ status: 'S2', payload: { lastName: 'Müller-Lüdenscheidt' } });
  });

  it('reads form fields in it, percent-encoded or not, and the same fields in UTF-8 are a duplicate', async () => {
    const v = await verification();
    const before = await events();
    // As a browser writes a form submitted in windows-1251: each byte of Иванов percent-encoded, `&` and `=` in a
    // value too; the raw bytes of Пётр as they are.
    const encoded = [...cp1251('Иванов & Co=1')].map((b) => `%${b.toString(16).padStart(2, '0')}`).join('');
    const form = Buffer.concat([Buffer.from(`status=COMPLETED&lastName=${encoded}&firstName=`), cp1251('Пётр')]);
    const res = await post(v.url, form, 'application/x-www-form-urlencoded; charset=windows-1251');
    expect(res.status, JSON.stringify(res.json)).toBe(204);
    const fields = { status: 'COMPLETED', lastName: 'Иванов & Co=1', firstName: 'Пётр' };
    expect(await completion(v.id)).toMatchObject({ status: 'COMPLETED', payload: fields });
    const utf8 = new URLSearchParams(fields).toString();
    expect((await post(v.url, utf8, 'application/x-www-form-urlencoded')).status).toBe(204);
    expect(await events()).toBe(before + 1);
  });
});

describe('a mobile-ID notification in a declared charset', () => {
  it('is read in windows-1251, and the same body in UTF-8 is its duplicate', async () => {
    const body = JSON.stringify({
      auth_req_id: 'cs-1',
      error: 'access_denied',
      error_description: 'пользователь отказался',
    });
    const res = await notify(cp1251(body), 'application/json; charset=windows-1251');
    expect(res.status, JSON.stringify(res.json)).toBe(204);
    const read = await gw.graphql(QUERY, { id: 'cs-1' });
    expect(read.data!.mobileIdAuthentication).toMatchObject({
      authReqId: 'cs-1',
      error: 'access_denied',
      errorDescription: 'пользователь отказался',
    });
    expect((await notify(body, 'application/json')).status).toBe(204);
    expect(await storedEvents(gw, 'cs-1')).toHaveLength(1);
  });

  it('reads form fields in the charset', async () => {
    const percent = (word: string) => [...cp1251(word)].map((b) => `%${b.toString(16).toUpperCase()}`).join('');
    const description = ['в', 'доступе', 'отказано'].map(percent).join('+');
    const form = `auth_req_id=cs-2&error=access_denied&error_description=${description}`;
    const res = await notify(form, 'application/x-www-form-urlencoded; charset=windows-1251');
    expect(res.status, JSON.stringify(res.json)).toBe(204);
    const read = await gw.graphql(QUERY, { id: 'cs-2' });
    expect(read.data!.mobileIdAuthentication).toMatchObject({ errorDescription: 'в доступе отказано' });
  });
});

describe('a body in a charset that cannot be read', () => {
  const refusal = (description: string) => ({ error: 'invalid_request', error_description: description });

  it('is refused 415 for a charset the gateway does not know, naming it, nothing stored', async () => {
    const v = await verification();
    const before = await events();
    const description = 'the charset "x-klingon" is not one the gateway can read: send the body in UTF-8';
    const body = JSON.stringify({ auth_req_id: 'cs-415', error: 'access_denied', error_description: 'd' });
    expect(await notify(body, 'application/json; charset=x-klingon')).toEqual({
      status: 415,
      json: refusal(description),
    });
    expect(await post(v.url, JSON.stringify({ status: 'X' }), 'application/json; charset="X-Klingon"')).toEqual({
      status: 415,
      json: refusal(description),
    });
    expect(await events()).toBe(before);
    const rejections = await gw.graphql(`{ mobileIdRejections(first: 1) { httpStatus reason description } }`);
    expect(rejections.data!.mobileIdRejections).toEqual([
      { httpStatus: 415, reason: 'UNSUPPORTED_MEDIA_TYPE', description },
    ]);
  });

  it('is refused 400 for bytes invalid in the declared charset, naming it, nothing stored', async () => {
    const v = await verification();
    const before = await events();
    // A lone surrogate in UTF-16, an odd byte count, a byte windows-1253 leaves unassigned (raw, or percent-encoded).
    const lone = Buffer.concat([
      Buffer.from('{"status":"', 'utf16le'),
      Buffer.from([0x00, 0xd8]),
      Buffer.from('"}', 'utf16le'),
    ]);
    const cases: Array<[string, Buffer | string, string]> = [
      ['utf-16le', lone, 'application/json; charset=utf-16le'],
      ['utf-16le', Buffer.from('{}x'), 'application/json; charset=utf-16le'],
      [
        'windows-1253',
        Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d]),
        'text/plain; charset=windows-1253',
      ],
      ['windows-1253', 'status=%FF', 'application/x-www-form-urlencoded; charset=windows-1253'],
    ];
    for (const [charset, body, type] of cases) {
      const description = `the body is not valid text in its declared charset "${charset}"`;
      expect(await post(v.url, body, type), type).toEqual({ status: 400, json: refusal(description) });
    }
    const notification = Buffer.concat([
      Buffer.from('{"auth_req_id":"cs-400","error":"'),
      Buffer.from([0xff]),
      Buffer.from('"}'),
    ]);
    expect(await notify(notification, 'application/json; charset=windows-1253')).toEqual({
      status: 400,
      json: refusal('the body is not valid text in its declared charset "windows-1253"'),
    });
    expect(await events()).toBe(before);
  });
});
