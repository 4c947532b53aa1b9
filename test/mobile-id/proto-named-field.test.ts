import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';

import { gatewaysPerTest, type TestGateway } from '../helpers/gateway.js';
import { postNotification, QUERY } from '../helpers/mobile-id.js';

// An unknown field named __proto__ is a name like any other: kept as the notification's own field up to the size
// kept, or dropped and counted past it, in JSON and form bodies, with the plain checks on and off.
const start = gatewaysPerTest();

const dropped = async (gw: TestGateway) =>
  (await gw.gateway.services.metrics.webhookFieldsDropped.get()).values.find((v) => v.labels.endpoint === 'mobile-id')
    ?.value ?? 0;

/** The JSON text of `body` with a last field named __proto__ (an object literal would set its prototype instead). */
const jsonWithProto = (body: object, value: unknown) =>
  JSON.stringify(body).replace(/}$/, `,"__proto__":${JSON.stringify(value)}}`);

const SUCCESS_FIELDS = new Set([
  'auth_req_id',
  'access_token',
  'token_type',
  'id_token',
  'expires_in',
  'correlation_id',
]);

const failure = (authReqId: string) => ({
  auth_req_id: authReqId,
  error: 'access_denied',
  error_description: 'Client timeout',
});

async function otherFields(gw: TestGateway, authReqId: string): Promise<string> {
  const read = await gw.graphql(QUERY, { id: authReqId });
  expect(read.errors).toBeUndefined();
  // As text: the JSON an app reads, where a field named __proto__ is a field.
  return JSON.stringify(read.data!.mobileIdAuthentication.otherFields);
}

describe.each(['true', 'false'])(
  'an unknown notification field named __proto__ (MOBILEID_PLAIN_CHECKS=%s)',
  (plain) => {
    it('is kept with the other unknown fields, in the order sent, in a success and a failure', async () => {
      const gw = await start({ MOBILEID_PLAIN_CHECKS: plain });
      const id = `proto-${randomUUID()}`;
      const n = await gw.gateway.sandbox.mobileId!.buildNotification({ authReqId: id, fields: { vendor: 'v' } });
      const success = jsonWithProto(n.body, { nested: 1 });
      expect((await postNotification(gw, success, { headers: n.headers })).status).toBe(204);
      const unknown = Object.entries(n.body).filter(([k]) => !SUCCESS_FIELDS.has(k));
      expect(unknown.map(([k]) => k)).toContain('vendor');
      expect(await otherFields(gw, id)).toBe(jsonWithProto(Object.fromEntries(unknown), { nested: 1 }));

      const failed = `proto-failure-${randomUUID()}`;
      expect((await postNotification(gw, jsonWithProto({ ...failure(failed), b: 2 }, 'text'))).status).toBe(204);
      expect(await otherFields(gw, failed)).toBe('{"b":2,"__proto__":"text"}');
      expect(await dropped(gw)).toBe(0);
    });

    it('is kept from a form body, and refused when given twice like any other field', async () => {
      const gw = await start({ MOBILEID_PLAIN_CHECKS: plain });
      const id = `proto-form-${randomUUID()}`;
      const form = `${new URLSearchParams(failure(id)).toString()}&__proto__=kept`;
      const contentType = 'application/x-www-form-urlencoded';
      expect((await postNotification(gw, form, { contentType })).status).toBe(204);
      expect(await otherFields(gw, id)).toBe('{"__proto__":"kept"}');

      const twice = `${new URLSearchParams(failure(`${id}-2`)).toString()}&__proto__=a&__proto__=b`;
      const res = await postNotification(gw, twice, { contentType });
      expect(res.status).toBe(400);
      expect(res.json).toMatchObject({
        error: 'invalid_request',
        error_description: '__proto__ is given more than once',
      });
    });

    it('is dropped and counted, as any other, past the size kept', async () => {
      const gw = await start({ MOBILEID_PLAIN_CHECKS: plain });
      const id = `proto-big-${randomUUID()}`;
      expect(
        (await postNotification(gw, jsonWithProto({ ...failure(id), small: 'kept' }, 'y'.repeat(60_000)))).status,
      ).toBe(204);
      expect(await otherFields(gw, id)).toBe('{"small":"kept"}');
      expect(await dropped(gw)).toBe(1);
      expect(gw.logs()).toContain('unknown fields over 4096 bytes were not kept');
    });
  },
);
