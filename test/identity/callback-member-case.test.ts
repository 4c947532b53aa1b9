// The verification and identification callback payloads are not shown in the spec (Events 1 and 2), so the names the
// gateway reads in them (docs/decisions/004 and 018) are its guesses, and nothing says in which letter case a platform
// writes them. A member in another case is read like the same member in the gateway's case: the id and status are
// found, and an id that names another verification is refused as it is when written in the gateway's case.
import type { Client } from 'graphql-ws';
import { request } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

import { IDENTIFICATION_EVENT_KIND } from '../../src/identity/completions.js';
import { VERIFICATION_EVENT_KIND } from '../../src/identity/service.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { subscribe as subscribeOn, subscriptionsOnBus, type Subscription } from '../helpers/identity.js';
import { wsClient } from '../helpers/mobile-id.js';
import { subscribers, waitFor } from '../helpers/wait.js';

let t: TestGateway;
const clients: Client[] = [];
const client = (key: string) => {
  const c = wsClient(t, { key });
  clients.push(c);
  return c;
};
const open: Subscription[] = [];
/** A subscription that afterEach stops, also when its test failed before stopping it. */
const subscribe = (...args: Parameters<typeof subscribeOn>) => {
  const sub = subscribeOn(...args);
  open.push(sub);
  return sub;
};
beforeAll(async () => {
  t = await startTestGateway({ GATEWAY_API_KEYS: 'key-a,key-b', SANDBOX_CALLBACK_DELAY_MS: '600000' });
});
afterEach(() => {
  for (const sub of open.splice(0)) sub.stop();
  return waitFor(
    () => subscribers(t, VERIFICATION_EVENT_KIND) === 0 && subscribers(t, IDENTIFICATION_EVENT_KIND) === 0,
    5_000,
    "the last test's subscriptions to end",
  );
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.dispose()));
  await t?.close();
});

async function post(
  url: string,
  body: string,
  headers: Record<string, string> = { 'content-type': 'application/json' },
) {
  const res = await request(url, { method: 'POST', headers, body });
  const text = await res.body.text();
  return { status: res.statusCode, body: text ? (JSON.parse(text) as Record<string, unknown>) : undefined };
}

/** A verification registered by `key` with a callback: its id and the callbackUrl the sandbox was given. */
async function register(key: string): Promise<{ id: string; url: string }> {
  const res = await t.graphql(
    `mutation($input: RegisterVerificationInput!) { registerVerification(input: $input) { verification { externalId } } }`,
    { input: { workflowId: 'wf-case', applicant: { lastName: 'Case' } } },
    { key },
  );
  expect(res.errors).toBeUndefined();
  const id = res.data!.registerVerification.verification.externalId as string;
  const url = t.gateway.sandbox.verification!.verifications().find((v) => v.externalId === id)!.callbackUrl!;
  return { id, url };
}

let workflows = 0;
async function createIdentification(key: string): Promise<{ id: string; callbackUrl: string }> {
  const res = await t.graphql(
    `mutation($input: CreateIdentificationInput!) { createIdentification(input: $input) { identification { id callbackUrl } } }`,
    { input: { workflowId: `wf-case-${++workflows}` } },
    { key },
  );
  expect(res.errors).toBeUndefined();
  return res.data!.createIdentification.identification;
}

async function eventCount(kind: string, key: string): Promise<number> {
  const row = await t.gateway.services.store.db
    .selectFrom('events')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('kind', '=', kind)
    .where('key', '=', key)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

const VERIFICATION_COMPLETED = `subscription($externalId: ID) { verificationCompleted(externalId: $externalId) { externalId status payload } }`;
const IDENTIFICATION_COMPLETED = `subscription($id: ID) { identificationCompleted(id: $id) { id status event } }`;

describe('callback members in another letter case', () => {
  it('reads a verification callback’s Status and delivers it once to the subscriber', async () => {
    const v = await register('key-a');
    const sub = subscribe(client('key-a'), VERIFICATION_COMPLETED, { externalId: v.id });
    await subscriptionsOnBus(t, VERIFICATION_EVENT_KIND, v.id);
    const body = JSON.stringify({ VerificationExternalId: v.id, Status: 'COMPLETED', Decision: 'APPROVED' });
    expect((await post(v.url, body)).status).toBe(204);
    expect((await post(v.url, body)).status, 'an exact repeat is acknowledged').toBe(204);
    // A distinct later callback is the marker: had the repeat been published, it would come before it.
    expect((await post(v.url, JSON.stringify({ status: 'ARCHIVED' }))).status).toBe(204);
    await waitFor(() => sub.received.length > 1, 5_000, 'both callbacks');
    expect(sub.errors).toEqual([]);
    expect(sub.received.map((e) => e.verificationCompleted.status)).toEqual(['COMPLETED', 'ARCHIVED']);
    expect(await eventCount(VERIFICATION_EVENT_KIND, v.id)).toBe(2);
    sub.stop();
  });

  it('refuses a verification callback naming another verification under VerificationExternalId or EXTERNALID, storing nothing', async () => {
    const v = await register('key-a');
    const other = await register('key-a');
    const theirs = await register('key-b');
    for (const body of [
      { VerificationExternalId: other.id, Status: 'COMPLETED' },
      { EXTERNALID: theirs.id, status: 'COMPLETED' },
      { Data: { verificationexternalid: 'no-such-verification' }, status: 'COMPLETED' },
    ]) {
      const res = await post(v.url, JSON.stringify(body));
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body).toEqual({
        error: 'invalid_request',
        error_description: 'the body names another verification than the one this callbackUrl was issued for',
      });
    }
    for (const id of [v.id, other.id, theirs.id]) expect(await eventCount(VERIFICATION_EVENT_KIND, id)).toBe(0);
  });

  it('accepts an identification callback naming its identification under IdentificationId or ID, delivered once', async () => {
    for (const [name, status] of [
      ['IdentificationId', 'Status'],
      ['ID', 'STATE'],
    ] as const) {
      const link = await createIdentification('key-a');
      const sub = subscribe(client('key-a'), IDENTIFICATION_COMPLETED, { id: link.id });
      await subscriptionsOnBus(t, IDENTIFICATION_EVENT_KIND, link.id);
      const body = JSON.stringify({ [name]: link.id, [status]: 'DONE', EventType: 'finished' });
      for (let i = 0; i < 2; i++) expect((await post(link.callbackUrl, body)).status, body).toBe(204);
      expect((await post(link.callbackUrl, JSON.stringify({ id: link.id, status: 'ARCHIVED' }))).status).toBe(204);
      await waitFor(() => sub.received.length > 1, 5_000, 'both callbacks');
      expect(sub.received.map((e) => e.identificationCompleted)).toEqual([
        { id: link.id, status: 'DONE', event: 'finished' },
        { id: link.id, status: 'ARCHIVED', event: null },
      ]);
      expect(await eventCount(IDENTIFICATION_EVENT_KIND, link.id)).toBe(2);
      sub.stop();
    }
  });

  it('answers an identification callback naming another app’s identification under IdentificationId as an unknown one', async () => {
    const link = await createIdentification('key-a');
    const theirs = await createIdentification('key-b');
    const res = await post(link.callbackUrl, JSON.stringify({ IdentificationId: theirs.id, Status: 'DONE' }));
    expect(res.status).toBe(404);
    expect(res.body).toEqual({
      error: 'not_found',
      error_description: `identification ${theirs.id} was not created through this gateway for this callback address`,
    });
    expect(await eventCount(IDENTIFICATION_EVENT_KIND, theirs.id)).toBe(0);
  });
});
