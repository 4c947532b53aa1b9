import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

import { upstreamExternalId } from '../../src/identity/service.js';
import { SANDBOX_VERIFICATION_TOKEN, type VerificationSandbox } from '../../src/sandbox/verification.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';

const REGISTRATIONS = '/api/v2/verifications/workflow-instances';
const RESULTS = '/api/v2/verifications/results';
const RFM = '/api/v1/rfm/is-in-catalog';

const REGISTER = /* GraphQL */ `
  mutation Register($input: RegisterVerificationInput!, $key: UUID) {
    registerVerification(input: $input, idempotencyKey: $key) {
      verification {
        id
        externalId
        workflowId
        status
        jobResults
        callback
        createdAt
      }
      idempotencyKey
      upstreamIdempotencyKey
      replayed
    }
  }
`;

const APPLICANT = {
  lastName: 'Ivanov',
  firstName: 'Ivan',
  birthDate: '1990-01-01',
  passport: { series: '4500', number: '123456' },
};

async function register(t: TestGateway, input: Record<string, unknown>, key?: string) {
  const res = await t.graphql(REGISTER, {
    input: { workflowId: 'wf-kyc', applicant: APPLICANT, ...input },
    ...(key ? { key } : {}),
  });
  expect(res.errors).toBeUndefined();
  return res.data!.registerVerification;
}

const resultCalls = (s: VerificationSandbox) => s.requests.filter((r) => r.path === RESULTS);

describe('verification registration and batched results', () => {
  let t: TestGateway;
  let sandbox: VerificationSandbox;

  beforeAll(async () => {
    // Completion (and callback) only when a test asks for it.
    t = await startTestGateway({ SANDBOX_CALLBACK_DELAY_MS: '600000' });
    sandbox = t.gateway.sandbox.verification!;
  });
  afterAll(() => t.close());
  afterEach(() => {
    sandbox.clearRequests();
    sandbox.faults.clear();
  });

  it('registers with one POST carrying the JWT, workflowId, applicant, external id and a callbackUrl of the gateway', async () => {
    const externalId = `kyc-${randomUUID()}`;
    const payload = await register(t, { externalId });

    const [sent, ...rest] = sandbox.requests;
    expect(rest).toHaveLength(0);
    expect(sent!.method).toBe('POST');
    expect(sent!.path).toBe(REGISTRATIONS);
    expect(sent!.headers.authorization).toBe(`Bearer ${SANDBOX_VERIFICATION_TOKEN}`);
    expect(sent!.headers['content-type']).toBe('application/json');
    expect(sent!.headers['idempotency-key']).toBe(payload.upstreamIdempotencyKey);
    const body = sent!.body as Record<string, unknown>;
    expect(Object.keys(body).sort()).toEqual(['applicant', 'callbackUrl', 'verificationExternalId', 'workflowId']);
    // The upstream gets the app's id derived from its scope (here the open sandbox caller's): one id space for every app.
    const sentId = upstreamExternalId('open', externalId);
    expect(body).toMatchObject({ workflowId: 'wf-kyc', applicant: APPLICANT, verificationExternalId: sentId });
    const callbackUrl = String(body.callbackUrl);
    expect(callbackUrl).toMatch(new RegExp(`^${t.gateway.publicUrl}/webhooks/verification/[A-Za-z0-9_-]{43}$`));

    expect(payload.verification).toMatchObject({
      id: sentId,
      externalId,
      workflowId: 'wf-kyc',
      status: 'ACCEPTED',
      callback: true,
      jobResults: { status: 'ACCEPTED', jobs: expect.any(Array) },
    });
    expect(payload.replayed).toBe(false);
  });

  it('issues a different callback token per registration and stores only its hash, never the applicant', async () => {
    await register(t, {});
    await register(t, {});
    const urls = sandbox.requests.map((r) => String((r.body as Record<string, unknown>).callbackUrl));
    const tokens = urls.map((u) => u.split('/').at(-1)!);
    expect(new Set(tokens).size).toBe(2);

    const db = t.gateway.services.store.db;
    const rows = await db.selectFrom('verification_callbacks').selectAll().execute();
    const stored = JSON.stringify(rows);
    for (const token of tokens) expect(stored).not.toContain(token);
    const resources = JSON.stringify(
      await db.selectFrom('resources').selectAll().where('kind', '=', 'verification').execute(),
    );
    expect(resources).not.toContain('123456');
    const idempotency = JSON.stringify(await db.selectFrom('idempotency_records').selectAll().execute());
    expect(idempotency).not.toContain('123456');
    for (const token of tokens) expect(t.logs()).not.toContain(token);
  });

  it('sends no callbackUrl when callback is false, and takes the external id the upstream assigned', async () => {
    const payload = await register(t, { callback: false });
    const body = sandbox.requests[0]!.body as Record<string, unknown>;
    expect(body).not.toHaveProperty('callbackUrl');
    expect(body).not.toHaveProperty('verificationExternalId');
    expect(payload.verification.callback).toBe(false);
    expect(sandbox.verifications().map((v) => v.externalId)).toContain(payload.verification.externalId);
  });

  it('replays a client retry with the same key without a second registration', async () => {
    const key = randomUUID();
    const first = await register(t, { externalId: `retry-${key}` }, key);
    const second = await register(t, { externalId: `retry-${key}` }, key);
    expect(second.replayed).toBe(true);
    expect(second.verification).toEqual(first.verification);
    expect(sandbox.requests.filter((r) => r.path === REGISTRATIONS)).toHaveLength(1);
  });

  it('refuses an empty workflowId and a non-object applicant before the wire', async () => {
    const a = await t.graphql(REGISTER, { input: { workflowId: '', applicant: APPLICANT } });
    const b = await t.graphql(REGISTER, { input: { workflowId: 'wf', applicant: ['not', 'an', 'object'] } });
    expect(a.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', field: 'input.workflowId' });
    expect(b.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', field: 'input.applicant' });
    expect(sandbox.requests).toHaveLength(0);
  });

  it('maps verification upstream statuses to codes (404 unknown workflow, 409 existing id)', async () => {
    const notFound = await t.graphql(REGISTER, { input: { workflowId: 'unknown-wf', applicant: APPLICANT } });
    expect(notFound.errors?.[0]?.extensions).toMatchObject({
      code: 'NOT_FOUND',
      upstream: 'verification',
      status: 404,
    });
    const id = `dup-${randomUUID()}`;
    await register(t, { externalId: id });
    const conflict = await t.graphql(REGISTER, {
      input: { workflowId: 'wf-kyc', applicant: APPLICANT, externalId: id },
    });
    expect(conflict.errors?.[0]?.extensions).toMatchObject({ code: 'CONFLICT', status: 409 });
  });

  it('makes exactly one upstream results call for three lookups in one operation, through aliases and nested fields', async () => {
    const [a, b, c] = await Promise.all([register(t, {}), register(t, {}), register(t, {})]);
    const ids = [a, b, c].map((p) => p.verification.externalId as string);
    await sandbox.complete(ids[0]!);
    sandbox.clearRequests();

    const res = await t.graphql(
      `query Three($a: ID!, $b: ID!, $c: ID!) {
        first: verificationResults(externalIds: [$a]) { externalId status data }
        second: verificationResults(externalIds: [$b, "never-registered"]) { externalId status }
        third: node(id: $c) {
          ... on Verification {
            externalId
            result { externalId status verification { workflowId } }
          }
        }
      }`,
      { a: ids[0], b: ids[1], c: ids[2] },
    );
    expect(res.errors).toBeUndefined();

    const calls = resultCalls(sandbox);
    expect(calls).toHaveLength(1);
    expect(calls[0]!.headers.authorization).toBe(`Bearer ${SANDBOX_VERIFICATION_TOKEN}`);
    const sentIds = (calls[0]!.body as { verificationExternalId: string[] }).verificationExternalId;
    // An id the caller did not register is answered null without asking the upstream (tenancy, docs/decisions/010).
    expect([...sentIds].sort()).toEqual([...ids].sort());

    expect(res.data!.first).toEqual([
      { externalId: ids[0], status: 'COMPLETED', data: expect.objectContaining({ decision: 'APPROVED' }) },
    ]);
    expect(res.data!.second).toEqual([{ externalId: ids[1], status: 'IN_PROGRESS' }, null]);
    expect(res.data!.third).toEqual({
      externalId: ids[2],
      result: { externalId: ids[2], status: 'IN_PROGRESS', verification: { workflowId: 'wf-kyc' } },
    });
  });

  it('answers null for an id the upstream does not know, not an error for the whole list', async () => {
    const p = await register(t, {});
    const res = await t.graphql(
      `query($ids: [ID!]!) { verificationResults(externalIds: $ids) { externalId status } }`,
      {
        ids: ['missing-1', p.verification.externalId, 'missing-2'],
      },
    );
    expect(res.errors).toBeUndefined();
    expect(res.data!.verificationResults).toEqual([
      null,
      { externalId: p.verification.externalId, status: 'IN_PROGRESS' },
      null,
    ]);
  });

  it('maps an upstream failure of the results call to UPSTREAM_UNAVAILABLE after retries', async () => {
    const fault = { status: 503, retryAfterSeconds: null };
    const p = await register(t, {});
    sandbox.faults.enqueueFor(RESULTS, fault, fault, fault, fault, fault);
    const res = await t.graphql(`query($id: ID!) { verificationResults(externalIds: [$id]) { externalId } }`, {
      id: p.verification.externalId,
    });
    expect(res.errors?.[0]?.extensions).toMatchObject({ code: 'UPSTREAM_UNAVAILABLE', upstream: 'verification' });
  });

  it('refuses more than 1000 ids and empty ids before the wire', async () => {
    const many = Array.from({ length: 1001 }, (_, i) => `id-${i}`);
    const a = await t.graphql(`query($ids: [ID!]!) { verificationResults(externalIds: $ids) { externalId } }`, {
      ids: many,
    });
    const b = await t.graphql(`{ verificationResults(externalIds: ["ok", " "]) { externalId } }`);
    expect(a.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', field: 'externalIds' });
    expect(b.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', field: 'externalIds[1]' });
    expect(resultCalls(sandbox)).toHaveLength(0);
  });

  it('checks rfm with the JWT, passes the body as given and answers the JSON with inCatalog', async () => {
    const listed = await t.graphql(
      `mutation { checkRfm(input: { fullName: "Listed Person", birthDate: "1980-02-02" }) { result inCatalog idempotencyKey replayed } }`,
    );
    const clean = await t.graphql(`mutation { checkRfm(input: { fullName: "Petr Petrov" }) { inCatalog } }`);
    expect(listed.errors).toBeUndefined();
    const calls = sandbox.requests.filter((r) => r.path === RFM);
    expect(calls).toHaveLength(2);
    expect(calls[0]!.headers.authorization).toBe(`Bearer ${SANDBOX_VERIFICATION_TOKEN}`);
    expect(calls[0]!.body).toEqual({ fullName: 'Listed Person', birthDate: '1980-02-02' });
    expect(listed.data!.checkRfm).toMatchObject({
      inCatalog: true,
      replayed: false,
      result: { isInCatalog: true, matches: ['Listed Person'] },
    });
    expect(clean.data!.checkRfm.inCatalog).toBe(false);

    const bad = await t.graphql(`mutation { checkRfm(input: ["not", "an", "object"]) { inCatalog } }`);
    expect(bad.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', field: 'input' });
    expect(sandbox.requests.filter((r) => r.path === RFM)).toHaveLength(2);
  });
});

describe('verification results batch size', () => {
  it('splits one operation’s lookups into calls of at most VERIFICATION_RESULTS_BATCH_SIZE ids', async () => {
    const t = await startTestGateway({ VERIFICATION_RESULTS_BATCH_SIZE: '2', SANDBOX_CALLBACK_DELAY_MS: '600000' });
    try {
      const sandbox = t.gateway.sandbox.verification!;
      // Only verifications registered with the caller's key are looked up (docs/decisions/010).
      for (const externalId of ['v1', 'v2', 'v3', 'v4', 'v5']) await register(t, { externalId });
      sandbox.clearRequests();
      const res = await t.graphql(`{
        a: verificationResults(externalIds: ["v1", "v2", "v3"]) { externalId }
        b: verificationResults(externalIds: ["v4", "v5", "v1"]) { externalId }
      }`);
      expect(res.errors).toBeUndefined();
      const calls = resultCalls(sandbox).map(
        (r) => (r.body as { verificationExternalId: string[] }).verificationExternalId,
      );
      expect(calls).toHaveLength(3);
      expect(calls.every((ids) => ids.length <= 2)).toBe(true);
      expect(calls.flat().sort()).toEqual(
        ['v1', 'v2', 'v3', 'v4', 'v5'].map((id) => upstreamExternalId('open', id)).sort(),
      );
    } finally {
      await t.close();
    }
  });

  it('reads results from the upstream on every operation (no cache across requests)', async () => {
    const t = await startTestGateway({ SANDBOX_CALLBACK_DELAY_MS: '600000' });
    try {
      const sandbox = t.gateway.sandbox.verification!;
      const reg = await register(t, {});
      const id = reg.verification.externalId as string;
      const q = `query($id: ID!) { verificationResults(externalIds: [$id]) { status } }`;
      expect((await t.graphql(q, { id })).data!.verificationResults[0].status).toBe('IN_PROGRESS');
      await sandbox.complete(id);
      await waitFor(() => sandbox.verifications().find((v) => v.externalId === id)?.result);
      expect((await t.graphql(q, { id })).data!.verificationResults[0].status).toBe('COMPLETED');
      expect(resultCalls(sandbox)).toHaveLength(2);
    } finally {
      await t.close();
    }
  });
});
