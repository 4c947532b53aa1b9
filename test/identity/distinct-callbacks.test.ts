import fc from 'fast-check';
import type { Client } from 'graphql-ws';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { VerificationSandbox } from '../../src/sandbox/verification.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { subscribe, type Subscription } from '../helpers/identity.js';
import { wsClient } from '../helpers/mobile-id.js';
import { waitFor } from '../helpers/wait.js';

// Every distinct callback is kept and delivered once; only an exact repeat of a body is a duplicate. The ids and
// statuses are found where platforms put them, in JSON or form bodies (docs/decisions/041).

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
    }
  }
`;
const COMPLETION = /* GraphQL */ `
  query ($id: ID!) {
    node(id: $id) {
      ... on Verification {
        completion {
          externalId
          status
          payload
        }
      }
    }
  }
`;
const CREATE_IDENTIFICATION = /* GraphQL */ `
  mutation Create($input: CreateIdentificationInput!) {
    createIdentification(input: $input) {
      identification {
        id
      }
    }
  }
`;
const IDENTIFICATION_COMPLETED = /* GraphQL */ `
  subscription Completed($id: ID) {
    identificationCompleted(id: $id) {
      id
      status
      event
    }
  }
`;
const IDENTIFICATION_CALLBACK_URL = /* GraphQL */ `
  query ($workflowId: String!) {
    identificationCallbackUrl(workflowId: $workflowId)
  }
`;

let t: TestGateway;
let sandbox: VerificationSandbox;
const clients: Client[] = [];
beforeAll(async () => {
  // The sandbox calls back only when a test says so: every callback below is the test's own.
  t = await startTestGateway({ GATEWAY_API_KEYS: 'key-a,key-b', SANDBOX_CALLBACK_DELAY_MS: '600000' });
  sandbox = t.gateway.sandbox.verification!;
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.dispose()));
  await t.close();
});

async function register(): Promise<{ id: string; url: string }> {
  const res = await t.graphql(
    REGISTER,
    { input: { workflowId: 'wf-kyc', applicant: { lastName: 'Ivanova' } } },
    { key: 'key-a' },
  );
  expect(res.errors).toBeUndefined();
  const id = res.data!.registerVerification.verification.externalId as string;
  const url = sandbox.verifications().find((v) => v.externalId === id)?.callbackUrl;
  if (!url) throw new Error(`no callbackUrl for ${id}`);
  return { id, url };
}

async function post(url: string, body: unknown, contentType = 'application/json'): Promise<number> {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  const res = await request(url, { method: 'POST', headers: { 'content-type': contentType }, body: text });
  await res.body.dump();
  return res.statusCode;
}

/** A subscriber that is live (its first event, a marker callback, has arrived) before the test's callbacks. */
async function watch(id: string, url: string): Promise<Subscription> {
  const c = wsClient(t, { key: 'key-a' });
  clients.push(c);
  const sub = subscribe(c, COMPLETED, { externalId: id });
  expect(await post(url, { verificationExternalId: id, status: 'REGISTERED', marker: true })).toBe(204);
  await waitFor(() => sub.received.length === 1, 20_000, 'the marker callback');
  return sub;
}

const statuses = (sub: Subscription) => sub.received.slice(1).map((e) => e.verificationCompleted.status);

describe('every distinct verification callback is kept and delivered once', () => {
  it('delivers a callback whose status is nested under data, then a later distinct one, and reads the newest', async () => {
    const { id, url } = await register();
    const sub = await watch(id, url);
    expect(await post(url, { data: { verificationExternalId: id, status: 'IN_REVIEW' } })).toBe(204);
    expect(await post(url, { data: { verificationExternalId: id, status: 'COMPLETED', decision: 'APPROVED' } })).toBe(
      204,
    );
    await waitFor(() => sub.received.length === 3, 20_000, 'both nested callbacks');
    expect(statuses(sub)).toEqual(['IN_REVIEW', 'COMPLETED']);
    const read = await t.graphql(COMPLETION, { id }, { key: 'key-a' });
    expect(read.data!.node.completion).toMatchObject({
      externalId: id,
      status: 'COMPLETED',
      payload: { data: { decision: 'APPROVED' } },
    });
    sub.stop();
  });

  it('keeps two callbacks with the same status but different bodies (not only a new status is news)', async () => {
    const { id, url } = await register();
    const sub = await watch(id, url);
    expect(await post(url, { verificationExternalId: id, status: 'COMPLETED', decision: 'REJECTED' })).toBe(204);
    expect(await post(url, { verificationExternalId: id, status: 'COMPLETED', decision: 'APPROVED' })).toBe(204);
    await waitFor(() => sub.received.length === 3, 20_000, 'both callbacks');
    expect(sub.received.slice(1).map((e) => e.verificationCompleted.payload.decision)).toEqual([
      'REJECTED',
      'APPROVED',
    ]);
    sub.stop();
  });

  it('acknowledges an exact repeat, in any key order, and delivers it once', async () => {
    const { id, url } = await register();
    const sub = await watch(id, url);
    expect(await post(url, { verificationExternalId: id, status: 'COMPLETED', decision: 'APPROVED' })).toBe(204);
    expect(
      await post(url, `{"decision":"APPROVED",  "status":"COMPLETED","verificationExternalId":${JSON.stringify(id)}}`),
    ).toBe(204);
    // A distinct callback after the repeat: once it arrives, a delivery of the repeat would have arrived before it.
    expect(await post(url, { verificationExternalId: id, status: 'ARCHIVED' })).toBe(204);
    await waitFor(
      () => sub.received.some((e) => e.verificationCompleted.status === 'ARCHIVED'),
      20_000,
      'the callback after the repeat',
    );
    expect(statuses(sub)).toEqual(['COMPLETED', 'ARCHIVED']);
    sub.stop();
  });

  it.each([
    ['under verification', (id: string) => ({ verification: { externalId: id, status: 'COMPLETED' } })],
    ['under result', (id: string) => ({ result: { id, state: 'COMPLETED' } })],
    ['as an array of one', (id: string) => [{ verificationExternalId: id, status: 'COMPLETED' }]],
    [
      'under data as an array of one',
      (id: string) => ({ data: [{ verificationExternalId: id, verificationStatus: 'COMPLETED' }] }),
    ],
    [
      'without any id (the callback address names the verification)',
      () => ({ outcome: { status: 'COMPLETED' }, status: 'COMPLETED' }),
    ],
  ])('finds the id and status %s', async (_where, body) => {
    const { id, url } = await register();
    const sub = await watch(id, url);
    expect(await post(url, body(id))).toBe(204);
    await waitFor(() => sub.received.length === 2, 20_000, 'the callback');
    expect(sub.received[1].verificationCompleted).toMatchObject({ externalId: id, status: 'COMPLETED' });
    sub.stop();
  });

  it('accepts a form-encoded callback', async () => {
    const { id, url } = await register();
    const sub = await watch(id, url);
    expect(
      await post(
        url,
        new URLSearchParams({ verificationExternalId: id, status: 'COMPLETED', decision: 'APPROVED' }).toString(),
        'application/x-www-form-urlencoded',
      ),
    ).toBe(204);
    await waitFor(() => sub.received.length === 2, 20_000, 'the form callback');
    expect(sub.received[1].verificationCompleted).toMatchObject({
      externalId: id,
      status: 'COMPLETED',
      payload: { decision: 'APPROVED' },
    });
    sub.stop();
  });

  it('property: any sequence of callbacks in these shapes is acknowledged, and each distinct body is stored once', async () => {
    const { id, url } = await register();
    const shape = fc.constantFrom(
      (s: string) => ({ verificationExternalId: id, status: s }),
      (s: string) => ({ data: { verificationExternalId: id, status: s } }),
      (s: string) => ({ verification: { externalId: id, state: s } }),
      (s: string) => ({ result: [{ id, status: s }] }),
      (s: string) => [{ status: s }],
    );
    const callback = fc.tuple(shape, fc.constantFrom('IN_REVIEW', 'COMPLETED', 'REJECTED'), fc.boolean());
    let cases = 0;
    const distinct = new Set<string>();
    await fc.assert(
      fc.asyncProperty(fc.array(callback, { minLength: 1, maxLength: 6 }), async (seq) => {
        cases += 1;
        for (const [make, status, asForm] of seq) {
          const body = make(status);
          const form = asForm && !Array.isArray(body) && 'verificationExternalId' in body;
          const sent = form ? new URLSearchParams(body as Record<string, string>).toString() : body;
          expect(await post(url, sent, form ? 'application/x-www-form-urlencoded' : 'application/json')).toBe(204);
          distinct.add(JSON.stringify(body));
        }
      }),
      { numRuns: 40 },
    );
    expect(cases).toBe(40);
    const rows = await t.gateway.services.store.db
      .selectFrom('events')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('kind', '=', 'verification')
      .where('key', '=', id)
      .executeTakeFirstOrThrow();
    // A form body and its JSON twin are the same fields: both are text, so they are the same body.
    expect(Number(rows.n)).toBe(distinct.size);
  });
});

describe('every distinct identification callback is kept and delivered once', () => {
  it('delivers a nested-status callback and a later distinct one, as JSON and as form fields', async () => {
    const workflowId = 'wf-distinct';
    const url = (await t.graphql(IDENTIFICATION_CALLBACK_URL, { workflowId }, { key: 'key-a' })).data!
      .identificationCallbackUrl as string;
    const created = await t.graphql(CREATE_IDENTIFICATION, { input: { workflowId } }, { key: 'key-a' });
    const id = created.data!.createIdentification.identification.id as string;
    const c = wsClient(t, { key: 'key-a' });
    clients.push(c);
    const sub = subscribe(c, IDENTIFICATION_COMPLETED, { id });
    expect(await post(url, { identificationId: id, status: 'STARTED', event: 'marker' })).toBe(204);
    await waitFor(() => sub.received.length === 1, 20_000, 'the marker callback');

    expect(await post(url, { result: [{ identificationId: id, status: 'IN_PROGRESS' }] })).toBe(204);
    expect(
      await post(
        url,
        new URLSearchParams({ identificationId: id, status: 'COMPLETED', event: 'finished' }).toString(),
        'application/x-www-form-urlencoded',
      ),
    ).toBe(204);
    expect(
      await post(
        url,
        new URLSearchParams({ identificationId: id, status: 'COMPLETED', event: 'finished' }).toString(),
        'application/x-www-form-urlencoded',
      ),
    ).toBe(204);
    expect(await post(url, { identificationId: id, status: 'ARCHIVED' })).toBe(204);
    await waitFor(
      () => sub.received.some((e) => e.identificationCompleted.status === 'ARCHIVED'),
      20_000,
      'the last callback',
    );
    expect(sub.received.slice(1).map((e) => e.identificationCompleted.status)).toEqual([
      'IN_PROGRESS',
      'COMPLETED',
      'ARCHIVED',
    ]);
    sub.stop();
  });
});
