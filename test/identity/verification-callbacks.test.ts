import type { Client } from 'graphql-ws';
import { request } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

import { VERIFICATION_EVENT_KIND as KIND } from '../../src/identity/service.js';
import type { VerificationSandbox } from '../../src/sandbox/verification.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { subscribe, subscriptionsOnBus } from '../helpers/identity.js';
import { wsClient } from '../helpers/mobile-id.js';
import { subscribers, waitFor } from '../helpers/wait.js';

const REGISTER = /* GraphQL */ `
  mutation Register($input: RegisterVerificationInput!) {
    registerVerification(input: $input) {
      verification {
        externalId
      }
    }
  }
`;

const COMPLETED = /* GraphQL */ `
  subscription Completed($externalId: ID) {
    verificationCompleted(externalId: $externalId) {
      externalId
      status
      payload
      receivedAt
      verification {
        externalId
        workflowId
      }
    }
  }
`;

async function register(t: TestGateway, key?: string, extra: Record<string, unknown> = {}): Promise<string> {
  const res = await t.graphql(
    REGISTER,
    { input: { workflowId: 'wf-kyc', applicant: { lastName: 'Ivanova' }, ...extra } },
    key ? { key } : {},
  );
  expect(res.errors).toBeUndefined();
  return res.data!.registerVerification.verification.externalId;
}

function callbackUrlOf(sandbox: VerificationSandbox, externalId: string): string {
  const v = sandbox.verifications().find((x) => x.externalId === externalId);
  if (!v?.callbackUrl) throw new Error(`no callbackUrl for ${externalId}`);
  return v.callbackUrl;
}

async function post(url: string, body: string | Buffer, contentType = 'application/json') {
  const res = await request(url, { method: 'POST', headers: { 'content-type': contentType }, body });
  const text = await res.body.text();
  return { status: res.statusCode, body: text ? (JSON.parse(text) as Record<string, unknown>) : undefined };
}

const settled = (t: TestGateway, ...keys: (string | null)[]) => subscriptionsOnBus(t, KIND, ...keys);

async function eventCount(t: TestGateway, externalId?: string): Promise<number> {
  let q = t.gateway.services.store.db
    .selectFrom('events')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('kind', '=', 'verification');
  if (externalId) q = q.where('key', '=', externalId);
  const row = await q.executeTakeFirstOrThrow();
  return Number(row.n);
}

describe('verification callbacks as subscription events', () => {
  let t: TestGateway;
  let sandbox: VerificationSandbox;
  const clients: Client[] = [];
  const client = (key?: string) => {
    const c = wsClient(t, { key });
    clients.push(c);
    return c;
  };

  beforeAll(async () => {
    // The sandbox completes and calls back only when a test says so (sandbox.complete).
    t = await startTestGateway({ GATEWAY_API_KEYS: 'key-a,key-b', SANDBOX_CALLBACK_DELAY_MS: '600000' });
    sandbox = t.gateway.sandbox.verification!;
  });
  // Each test stops its subscriptions: the next starts once they have left the bus (settled counts from none).
  afterEach(() => waitFor(() => subscribers(t, KIND) === 0, 20_000, "the last test's subscriptions to end"));
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.dispose()));
    await t.close();
  });

  it('delivers a callback to a graphql-ws subscriber of its verification', async () => {
    const id = await register(t, 'key-a');
    const c = client('key-a');
    const sub = subscribe(c, COMPLETED, { externalId: id });
    await settled(t, id);
    expect(sub.received).toHaveLength(0);

    await sandbox.complete(id);
    const [event] = await waitFor(() => sub.received.length > 0 && sub.received, 20_000, 'the completion');
    expect(sub.errors).toEqual([]);
    expect(event.verificationCompleted).toMatchObject({
      externalId: id,
      status: 'COMPLETED',
      payload: { verificationExternalId: id, decision: 'APPROVED' },
      verification: { externalId: id, workflowId: 'wf-kyc' },
    });
    expect(sandbox.callbacks.filter((cb) => cb.externalId === id).map((cb) => cb.status)).toEqual([204]);
    sub.stop();
  });

  it('gives a late subscriber the stored result at once', async () => {
    const id = await register(t, 'key-a');
    await sandbox.complete(id);
    expect(await eventCount(t, id)).toBe(1);

    const sub = subscribe(client('key-a'), COMPLETED, { externalId: id });
    const [event] = await waitFor(() => sub.received.length > 0 && sub.received, 20_000, 'the stored completion');
    expect(event.verificationCompleted).toMatchObject({ externalId: id, status: 'COMPLETED' });
    // Once live, a later callback is the marker: had the stored result come twice, the second copy would precede it.
    await settled(t, id);
    const marker = JSON.stringify({ verificationExternalId: id, status: 'ARCHIVED' });
    expect((await post(callbackUrlOf(sandbox, id), marker)).status).toBe(204);
    await waitFor(() => sub.received.length > 1, 20_000, 'the marker');
    expect(sub.received.map((e) => e.verificationCompleted.status)).toEqual(['COMPLETED', 'ARCHIVED']);
    sub.stop();
  });

  it('acknowledges a duplicate callback and publishes it once', async () => {
    const id = await register(t, 'key-a');
    const c = client('key-a');
    const all = subscribe(c, COMPLETED);
    const one = subscribe(c, COMPLETED, { externalId: id });
    await settled(t, null, id);

    await sandbox.complete(id);
    await waitFor(() => one.received.length > 0, 20_000, 'the first delivery');
    expect(await sandbox.redeliver(id)).toBe(204);
    expect(await sandbox.redeliver(id)).toBe(204);
    expect(await eventCount(t, id)).toBe(1);
    // A distinct later callback is the marker: a published duplicate would reach both subscriptions before it.
    const marker = JSON.stringify({ verificationExternalId: id, status: 'ARCHIVED' });
    expect((await post(callbackUrlOf(sandbox, id), marker)).status).toBe(204);
    const statuses = (received: typeof one.received) =>
      received.filter((e) => e.verificationCompleted.externalId === id).map((e) => e.verificationCompleted.status);
    await waitFor(() => statuses(one.received).length > 1 && statuses(all.received).length > 1, 20_000, 'the marker');

    expect(statuses(one.received)).toEqual(['COMPLETED', 'ARCHIVED']);
    expect(statuses(all.received)).toEqual(['COMPLETED', 'ARCHIVED']);
    expect(await eventCount(t, id)).toBe(2);
    all.stop();
    one.stop();
  });

  it('publishes a later callback with a new status as a new event', async () => {
    const id = await register(t, 'key-a');
    const c = client('key-a');
    const sub = subscribe(c, COMPLETED, { externalId: id });
    await settled(t, id);
    const url = callbackUrlOf(sandbox, id);
    expect((await post(url, JSON.stringify({ verificationExternalId: id, status: 'IN_REVIEW' }))).status).toBe(204);
    expect(
      (await post(url, JSON.stringify({ verificationExternalId: id, status: 'COMPLETED', decision: 'APPROVED' })))
        .status,
    ).toBe(204);
    await waitFor(() => sub.received.length === 2, 20_000, 'two events');
    expect(sub.received.map((e) => e.verificationCompleted.status)).toEqual(['IN_REVIEW', 'COMPLETED']);
    sub.stop();
  });

  it('streams, without externalId, every completion of the caller’s API key and none of another key', async () => {
    const c = client('key-a');
    const sub = subscribe(c, COMPLETED);
    await settled(t, null);
    const mine = await register(t, 'key-a');
    const theirs = await register(t, 'key-b');
    // Another key's completion first: the key's own, published after it, is the marker.
    await sandbox.complete(theirs);
    await sandbox.complete(mine);
    await waitFor(
      () => sub.received.some((e) => e.verificationCompleted.externalId === mine),
      20_000,
      'key-a completion',
    );
    const seen = sub.received.map((e) => e.verificationCompleted.externalId);
    expect(seen).toContain(mine);
    expect(seen).not.toContain(theirs);
    sub.stop();
  });

  it('answers 404 to a forged callback path and stores nothing', async () => {
    const before = await eventCount(t);
    const id = await register(t, 'key-a');
    const real = callbackUrlOf(sandbox, id);
    const forged = real.slice(0, -4) + (real.endsWith('AAAA') ? 'BBBB' : 'AAAA');
    const body = JSON.stringify({ verificationExternalId: id, status: 'COMPLETED' });

    for (const url of [forged, `${t.url}/webhooks/verification/not-a-token`, `${t.url}/webhooks/verification/`]) {
      const res = await post(url, body);
      expect(res.status).toBe(404);
    }
    const res = await post(forged, body);
    expect(res.body).toMatchObject({ error: 'not_found' });
    expect(await eventCount(t)).toBe(before);
  });

  it('refuses a body that is not JSON, not an object, too large or about another verification with 400/413, storing nothing', async () => {
    const id = await register(t, 'key-a');
    const other = await register(t, 'key-a');
    const url = callbackUrlOf(sandbox, id);
    const before = await eventCount(t);

    const cases: Array<[string | Buffer, string, number]> = [
      ['{"status": ', 'application/json', 400],
      ['status=COMPLETED', 'text/plain', 400],
      ['status=COMPLETED&status=FAILED', 'application/x-www-form-urlencoded', 400],
      ['[1, 2, 3]', 'application/json', 400],
      [JSON.stringify({ verificationExternalId: other, status: 'COMPLETED' }), 'application/json', 400],
      [Buffer.alloc(1024 * 1024 + 10, 0x20), 'application/json', 413],
    ];
    for (const [body, type, status] of cases) {
      const res = await post(url, body, type);
      expect(res.status, `${type} ${String(body).slice(0, 40)}`).toBe(status);
      expect(res.body).toMatchObject({ error: 'invalid_request', error_description: expect.any(String) });
    }
    expect(await eventCount(t)).toBe(before);
  });

  it('keys a callback by the upstream-assigned id when the body does not name it', async () => {
    const id = await register(t, 'key-a');
    const url = callbackUrlOf(sandbox, id);
    const res = await post(url, JSON.stringify({ status: 'COMPLETED', decision: 'APPROVED' }));
    expect(res.status).toBe(204);
    const read = await t.graphql(
      `query($id: ID!) { node(id: $id) { ... on Verification { completion { externalId status } } } }`,
      { id },
      { key: 'key-a' },
    );
    expect(read.data!.node.completion).toEqual({ externalId: id, status: 'COMPLETED' });
  });

  it("keeps a callback whose only ids are of other things (the job's id, a check's id under result) as its address's", async () => {
    const id = await register(t, 'key-a');
    const url = callbackUrlOf(sandbox, id);
    for (const [n, body] of [
      [1, { id: 'job-77', status: 'COMPLETED' }],
      [2, { status: 'COMPLETED', result: { id: 'check-5', decision: 'APPROVED' } }],
    ] as const) {
      const res = await post(url, JSON.stringify(body));
      expect(res.status, JSON.stringify(res.body)).toBe(204);
      expect(await eventCount(t, id)).toBe(n);
    }
    const read = await t.graphql(
      `query($id: ID!) { node(id: $id) { ... on Verification { completion { externalId status payload } } } }`,
      { id },
      { key: 'key-a' },
    );
    expect(read.data!.node.completion).toMatchObject({
      externalId: id,
      status: 'COMPLETED',
      payload: { result: { id: 'check-5' } },
    });
  });
});

describe('verification callbacks end to end with the sandbox delay', () => {
  it('calls back after SANDBOX_CALLBACK_DELAY_MS and the subscriber gets the result', async () => {
    const t = await startTestGateway({ SANDBOX_CALLBACK_DELAY_MS: '300' });
    const c = wsClient(t);
    try {
      const id = await register(t);
      const sub = subscribe(c, COMPLETED, { externalId: id });
      const [event] = await waitFor(() => sub.received.length > 0 && sub.received, 20_000, 'the completion');
      expect(event.verificationCompleted).toMatchObject({ externalId: id, status: 'COMPLETED' });
      sub.stop();
    } finally {
      await c.dispose();
      await t.close();
    }
  });
});
