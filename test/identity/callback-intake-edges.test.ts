// What a verification or identification callback may look like and still be taken, and what is refused, seen as the
// platform and the app see it: the answer, what is stored, what a subscriber receives and what /metrics counts.
// The payloads are not shown in the spec (Events 1 and 2), so the names the gateway reads in them (docs/decisions/004
// and 018) are its guesses, and nothing says in which letter case a platform writes them: a member in another case is
// read like the same member in the gateway's case.
import type { Client } from 'graphql-ws';
import { request } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

import { IDENTIFICATION_EVENT_KIND } from '../../src/identity/completions.js';
import { VERIFICATION_EVENT_KIND } from '../../src/identity/service.js';
import { VERIFICATIONS_PATH } from '../../src/sandbox/verification.js';
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
    20_000,
    "the last test's subscriptions to end",
  );
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.dispose()));
  await t?.close();
});

const JSON_TYPE = { 'content-type': 'application/json' };

async function post(url: string, body: string | Buffer, headers: Record<string, string> = JSON_TYPE) {
  const res = await request(url, { method: 'POST', headers, body });
  const text = await res.body.text();
  return {
    status: res.statusCode,
    type: res.headers['content-type'],
    body: text ? (JSON.parse(text) as Record<string, unknown>) : undefined,
  };
}

async function register(key: string, externalId?: string): Promise<{ id: string; url: string }> {
  const res = await t.graphql(
    `mutation($input: RegisterVerificationInput!) { registerVerification(input: $input) { verification { externalId } } }`,
    { input: { workflowId: 'wf-edges', applicant: { lastName: 'Edge' }, ...(externalId ? { externalId } : {}) } },
    { key },
  );
  expect(res.errors).toBeUndefined();
  const id = res.data!.registerVerification.verification.externalId as string;
  const all = t.gateway.sandbox.verification!.verifications();
  return { id, url: all.at(-1)!.callbackUrl! };
}

let workflows = 0;
async function createIdentification(key: string): Promise<{ id: string; callbackUrl: string }> {
  const res = await t.graphql(
    `mutation($input: CreateIdentificationInput!) { createIdentification(input: $input) { identification { id callbackUrl } } }`,
    { input: { workflowId: `wf-edges-${++workflows}` } },
    { key },
  );
  expect(res.errors).toBeUndefined();
  return res.data!.createIdentification.identification;
}

async function events(kind?: string): Promise<number> {
  let q = t.gateway.services.store.db.selectFrom('events').select((eb) => eb.fn.countAll<number>().as('n'));
  if (kind) q = q.where('kind', '=', kind);
  return Number((await q.executeTakeFirstOrThrow()).n);
}

async function webhookCount(endpoint: string, outcome: string): Promise<number> {
  const text = await (await fetch(`${t.url}/metrics`)).text();
  const line = text
    .split('\n')
    .find((l) => l.startsWith(`gateway_webhooks_total{endpoint="${endpoint}",outcome="${outcome}"}`));
  return line ? Number(line.split(' ').at(-1)) : 0;
}

const VERIFICATION_COMPLETED = `subscription($externalId: ID) { verificationCompleted(externalId: $externalId) { externalId status payload } }`;
const IDENTIFICATION_COMPLETED = `subscription($id: ID) { identificationCompleted(id: $id) { id status payload } }`;

describe('verification callbacks: tolerant of how they are written', () => {
  it('takes a charset parameter, a byte order mark, members it does not know, a missing status and a number id, each delivered once', async () => {
    const v = await register('key-a', '4711');
    const sub = subscribe(client('key-a'), VERIFICATION_COMPLETED, { externalId: '4711' });
    await subscriptionsOnBus(t, VERIFICATION_EVENT_KIND, '4711');
    const sent: Array<[string | Buffer, Record<string, string>]> = [
      [JSON.stringify({ status: 'S1' }), { 'content-type': 'Application/JSON; Charset="UTF-8"' }],
      ['\uFEFF' + JSON.stringify({ status: 'S2' }), JSON_TYPE],
      [JSON.stringify({ status: 'S3', unknownMember: { deep: [1, 'two'] }, score: 0.93 }), JSON_TYPE],
      [JSON.stringify({ decision: 'APPROVED' }), JSON_TYPE],
      [JSON.stringify({ verificationExternalId: 4711, status: 'S5' }), JSON_TYPE],
      ['status=S6&verificationExternalId=4711', { 'content-type': 'application/x-www-form-urlencoded; charset=utf-8' }],
    ];
    for (const [body, headers] of sent) {
      // Each twice: the repeat is acknowledged and neither stored nor published again.
      for (let i = 0; i < 2; i++) expect((await post(v.url, body, headers)).status, String(body)).toBe(204);
    }
    await waitFor(() => sub.received.length >= sent.length, 20_000, 'every callback');
    // A distinct last callback is the marker: a published repeat would come before it.
    expect((await post(v.url, JSON.stringify({ status: 'LAST' }))).status).toBe(204);
    await waitFor(() => sub.received.length > sent.length, 20_000, 'the marker');
    expect(sub.errors).toEqual([]);
    expect(sub.received.map((e) => e.verificationCompleted.status)).toEqual([
      'S1',
      'S2',
      'S3',
      null,
      'S5',
      'S6',
      'LAST',
    ]);
    expect(sub.received.every((e) => e.verificationCompleted.externalId === '4711')).toBe(true);
    sub.stop();
  });

  it('takes a JSON body sent without a Content-Type, as the mobile-ID webhook does', async () => {
    const v = await register('key-a');
    const sub = subscribe(client('key-a'), VERIFICATION_COMPLETED, { externalId: v.id });
    await subscriptionsOnBus(t, VERIFICATION_EVENT_KIND, v.id);
    expect((await post(v.url, JSON.stringify({ status: 'UNTYPED' }), {})).status).toBe(204);
    await waitFor(() => sub.received.length > 0, 20_000, 'the callback');
    expect(sub.received.map((e) => e.verificationCompleted.status)).toEqual(['UNTYPED']);
    sub.stop();
  });

  it('takes a JSON body whatever type it declares, and refuses one that is not JSON under such a type as before', async () => {
    const v = await register('key-a');
    const link = await createIdentification('key-a');
    const verifications = subscribe(client('key-a'), VERIFICATION_COMPLETED, { externalId: v.id });
    const identifications = subscribe(client('key-a'), IDENTIFICATION_COMPLETED, { id: link.id });
    await subscriptionsOnBus(t, VERIFICATION_EVENT_KIND, v.id);
    await subscriptionsOnBus(t, IDENTIFICATION_EVENT_KIND, link.id);
    const before = { events: await events(), rejected: await webhookCount('verification', 'rejected') };
    const refusal = {
      error: 'invalid_request',
      error_description:
        'the body must be JSON (Content-Type: application/json) or form fields (application/x-www-form-urlencoded)',
    };
    const types = ['text/plain; charset=utf-8', 'application/octet-stream', 'multipart/form-data; boundary=x'];
    for (const type of types) {
      const refused = await post(v.url, 'status=COMPLETED', { 'content-type': type });
      expect([refused.status, refused.body], type).toEqual([400, refusal]);
      expect((await post(v.url, '', { 'content-type': type })).body, type).toEqual(refusal);
    }
    expect(await events()).toBe(before.events);
    expect(await webhookCount('verification', 'rejected')).toBe(before.rejected + 2 * types.length);
    for (const [i, type] of types.entries()) {
      const body = JSON.stringify({ status: `TYPED-${i}` });
      expect((await post(v.url, body, { 'content-type': type })).status, type).toBe(204);
      const identification = JSON.stringify({ id: link.id, status: `TYPED-${i}` });
      expect((await post(link.callbackUrl, identification, { 'content-type': type })).status, type).toBe(204);
    }
    await waitFor(() => verifications.received.length >= types.length, 20_000, 'the verification callbacks');
    await waitFor(() => identifications.received.length >= types.length, 20_000, 'the identification callbacks');
    const statuses = types.map((_, i) => `TYPED-${i}`);
    expect(verifications.received.map((e) => e.verificationCompleted.status)).toEqual(statuses);
    expect(identifications.received.map((e) => e.identificationCompleted.status)).toEqual(statuses);
  });
});

describe('callbacks: strict about what they may change', () => {
  it('refuses an unknown token, a body that is not JSON, too large, too deep or about another verification: the documented answer, nothing stored or published, counted', async () => {
    const v = await register('key-a');
    const other = await register('key-b');
    const sub = subscribe(client('key-a'), VERIFICATION_COMPLETED, {});
    await subscriptionsOnBus(t, VERIFICATION_EVENT_KIND, null);
    const before = { events: await events(), unknown: await webhookCount('verification', 'unknown') };
    const rejectedBefore = await webhookCount('verification', 'rejected');
    const forged = `${t.url}/webhooks/verification/${'A'.repeat(43)}`;
    const cases: Array<[string, string | Buffer, number, string]> = [
      [forged, JSON.stringify({ status: 'X' }), 404, 'not_found'],
      [v.url, '{"status": ', 400, 'invalid_request'],
      [v.url, 'null', 400, 'invalid_request'],
      [v.url, Buffer.alloc(1024 * 1024 + 1, 0x20), 413, 'invalid_request'],
      [v.url, `{"status":"X","n":${'['.repeat(65)}${']'.repeat(65)}}`, 400, 'invalid_request'],
      [v.url, JSON.stringify({ verificationExternalId: other.id, status: 'X' }), 400, 'invalid_request'],
    ];
    for (const [url, body, status, error] of cases) {
      const res = await post(url, body);
      expect(res.status, String(body).slice(0, 40)).toBe(status);
      expect(res.type).toMatch(/^application\/json/);
      expect(res.body).toEqual({ error, error_description: expect.any(String) });
    }
    expect(await events()).toBe(before.events);
    expect(await webhookCount('verification', 'unknown')).toBe(before.unknown + 1);
    expect(await webhookCount('verification', 'rejected')).toBe(rejectedBefore + cases.length - 1);
    // Nothing refused was published: the first event the subscriber sees is this marker.
    expect((await post(v.url, JSON.stringify({ status: 'MARKER' }))).status).toBe(204);
    await waitFor(() => sub.received.length > 0, 20_000, 'the marker');
    expect(sub.received.map((e) => e.verificationCompleted.status)).toEqual(['MARKER']);
    sub.stop();
  });

  it('refuses a verification callback that carries no field at all as it refuses a body neither JSON nor form fields: nothing stored, published or changed', async () => {
    const v = await register('key-a');
    const sub = subscribe(client('key-a'), VERIFICATION_COMPLETED, { externalId: v.id });
    await subscriptionsOnBus(t, VERIFICATION_EVENT_KIND, v.id);
    expect((await post(v.url, JSON.stringify({ status: 'RESULT' }))).status).toBe(204);
    await waitFor(() => sub.received.length > 0, 20_000, 'the result');
    const before = { events: await events(), rejected: await webhookCount('verification', 'rejected') };
    const reference = await post(v.url, 'status=PLAIN', { 'content-type': 'text/plain' });
    const FORM = { 'content-type': 'application/x-www-form-urlencoded' };
    const empties: Array<[string, Record<string, string>]> = [
      ['{}', JSON_TYPE],
      ['[{}]', JSON_TYPE],
      ['', FORM],
      ['&', FORM],
    ];
    for (const [body, headers] of empties) {
      const res = await post(v.url, body, headers);
      const what = `${headers['content-type']} ${JSON.stringify(body)}`;
      expect(res.status, what).toBe(reference.status);
      expect(res.type, what).toMatch(/^application\/json/);
      expect(res.body, what).toEqual({ error: 'invalid_request', error_description: expect.any(String) });
      expect(res.body!.error_description, what).toMatch(/no field/);
    }
    expect(await events()).toBe(before.events);
    expect(await webhookCount('verification', 'rejected')).toBe(before.rejected + empties.length + 1);
    // The result stored before is still what a read returns, and the subscriber's next event is the marker.
    const completion = `query($id: ID!) { node(id: $id) { ... on Verification { completion { status } } } }`;
    expect((await t.graphql(completion, { id: v.id }, { key: 'key-a' })).data!.node.completion).toEqual({
      status: 'RESULT',
    });
    // Tolerant of what a field holds: a body with one field, even a null one, is a callback.
    expect((await post(v.url, JSON.stringify({ status: null, note: 'MARKER' }))).status).toBe(204);
    await waitFor(() => sub.received.length > 1, 20_000, 'the marker');
    expect(sub.received.map((e) => e.verificationCompleted.payload)).toEqual([
      { status: 'RESULT' },
      { status: null, note: 'MARKER' },
    ]);
    sub.stop();
  });

  it('refuses, on an address not yet bound to its verification, a body naming a verification another address of the app holds, and binds the address to the first id it names', async () => {
    const held = await register('key-a');
    const theirs = await register('key-b');
    // The registration's answer hides the id (UPSTREAM_ANSWER_INCOMPLETE): its address is bound to no verification yet.
    t.gateway.sandbox.verification!.faults.enqueueFor(VERIFICATIONS_PATH, {
      alter: (body) => {
        const { verificationExternalId, ...rest } = body as Record<string, unknown>;
        return { ...rest, registration: [{ ref: verificationExternalId }] };
      },
    });
    const incomplete = await t.graphql(
      `mutation($input: RegisterVerificationInput!) { registerVerification(input: $input) { verification { externalId } } }`,
      { input: { workflowId: 'wf-edges', applicant: { lastName: 'Unbound' } } },
      { key: 'key-a' },
    );
    expect(incomplete.errors![0]!.extensions!.code).toBe('UPSTREAM_ANSWER_INCOMPLETE');
    const unbound = t.gateway.sandbox.verification!.verifications().at(-1)!;
    const sub = subscribe(client('key-a'), VERIFICATION_COMPLETED, {});
    await subscriptionsOnBus(t, VERIFICATION_EVENT_KIND, null);
    const before = { events: await events(), rejected: await webhookCount('verification', 'rejected') };
    // As a bound address answers a body naming another verification.
    const reference = await post(theirs.url, JSON.stringify({ verificationExternalId: held.id, status: 'HIJACK' }));
    expect(reference.status).toBe(400);
    const refusals: Array<[string, Record<string, unknown>]> = [
      ['held by another address of the app', { verificationExternalId: held.id, status: 'HIJACK' }],
      ['held, under externalId and nested', { data: { externalId: held.id, status: 'HIJACK' } }],
      ["an id that may be a job's", { id: 'job-1', status: 'HIJACK' }],
    ];
    for (const [what, body] of refusals) {
      const res = await post(unbound.callbackUrl!, JSON.stringify(body));
      expect(res.status, what).toBe(400);
      expect(res.type, what).toMatch(/^application\/json/);
      expect(res.body, what).toEqual({ error: 'invalid_request', error_description: expect.any(String) });
    }
    const hijack = await post(unbound.callbackUrl!, JSON.stringify(refusals[0]![1]));
    expect(hijack.body).toEqual(reference.body);
    expect(await events()).toBe(before.events);
    expect(await webhookCount('verification', 'rejected')).toBe(before.rejected + refusals.length + 2);
    const completion = `query($id: ID!) { node(id: $id) { ... on Verification { completion { status } } } }`;
    expect((await t.graphql(completion, { id: held.id }, { key: 'key-a' })).data!.node.completion).toBeNull();
    expect((await t.graphql(completion, { id: theirs.id }, { key: 'key-b' })).data!.node.completion).toBeNull();

    // Its own verification's callback is taken, and binds the address: then it names that one only.
    const own = JSON.stringify({ verificationExternalId: unbound.externalId, status: 'MARKER' });
    expect((await post(unbound.callbackUrl!, own)).status).toBe(204);
    await waitFor(() => sub.received.length > 0, 20_000, 'the marker');
    expect(sub.received.map((e) => e.verificationCompleted)).toMatchObject([
      { externalId: unbound.externalId, status: 'MARKER' },
    ]);
    const elsewhere = JSON.stringify({ verificationExternalId: 'never-registered', status: 'X' });
    expect((await post(unbound.callbackUrl!, elsewhere)).body).toEqual(reference.body);
    expect((await post(unbound.callbackUrl!, JSON.stringify({ status: 'LATER' }))).status).toBe(204);
    expect(await events()).toBe(before.events + 2);
    sub.stop();
  });

  it('keeps a second, different outcome for a finished identification and delivers each distinct one once (decision 041)', async () => {
    const link = await createIdentification('key-a');
    const sub = subscribe(client('key-a'), IDENTIFICATION_COMPLETED, { id: link.id });
    await subscriptionsOnBus(t, IDENTIFICATION_EVENT_KIND, link.id);
    const first = JSON.stringify({ id: link.id, status: 'COMPLETED' });
    const second = JSON.stringify({ id: link.id, status: 'FAILED' });
    for (const body of [first, first, second, second, first])
      expect((await post(link.callbackUrl, body)).status).toBe(204);
    await waitFor(() => sub.received.length > 1, 20_000, 'both outcomes');
    expect((await post(link.callbackUrl, JSON.stringify({ id: link.id, status: 'MARKER' }))).status).toBe(204);
    await waitFor(() => sub.received.length > 2, 20_000, 'the marker');
    expect(sub.received.map((e) => e.identificationCompleted.status)).toEqual(['COMPLETED', 'FAILED', 'MARKER']);
    const read = await t.graphql(
      `query($id: ID!) { identification(id: $id) { status } }`,
      { id: link.id },
      { key: 'key-a' },
    );
    expect(read.data!.identification).toEqual({ status: 'MARKER' });
    sub.stop();
  });

  it('answers an identification address of one app naming another app’s identification exactly as an unknown one', async () => {
    const mine = await createIdentification('key-a');
    const theirs = await createIdentification('key-b');
    const before = await events(IDENTIFICATION_EVENT_KIND);
    const forOther = await post(mine.callbackUrl, JSON.stringify({ id: theirs.id, status: 'COMPLETED' }));
    const forNone = await post(mine.callbackUrl, JSON.stringify({ id: 'no-such-identification', status: 'COMPLETED' }));
    expect([forOther.status, forNone.status]).toEqual([404, 404]);
    const shape = (r: typeof forOther, id: string) => String(r.body!.error_description).replace(id, '<id>');
    expect(shape(forOther, theirs.id)).toBe(shape(forNone, 'no-such-identification'));
    expect(await events(IDENTIFICATION_EVENT_KIND)).toBe(before);
    const read = await t.graphql(
      `query($id: ID!) { identification(id: $id) { status } }`,
      { id: theirs.id },
      { key: 'key-b' },
    );
    expect(read.data!.identification).toEqual({ status: null });
  });
});

async function eventCount(kind: string, key: string): Promise<number> {
  const row = await t.gateway.services.store.db
    .selectFrom('events')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('kind', '=', kind)
    .where('key', '=', key)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/** identificationCompleted with the callback's event name. */
const IDENTIFICATION_EVENT = `subscription($id: ID) { identificationCompleted(id: $id) { id status event } }`;

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
    await waitFor(() => sub.received.length > 1, 20_000, 'both callbacks');
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
      const sub = subscribe(client('key-a'), IDENTIFICATION_EVENT, { id: link.id });
      await subscriptionsOnBus(t, IDENTIFICATION_EVENT_KIND, link.id);
      const body = JSON.stringify({ [name]: link.id, [status]: 'DONE', EventType: 'finished' });
      for (let i = 0; i < 2; i++) expect((await post(link.callbackUrl, body)).status, body).toBe(204);
      expect((await post(link.callbackUrl, JSON.stringify({ id: link.id, status: 'ARCHIVED' }))).status).toBe(204);
      await waitFor(() => sub.received.length > 1, 20_000, 'both callbacks');
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
