import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';

import { RESULTS_PATH, VERIFICATIONS_PATH } from '../../src/sandbox/verification.js';
import { gatewaysPerTest, tempDataDir, type TestGateway } from '../helpers/gateway.js';

/**
 * A verification registration answered 2xx is a registration, even when the gateway cannot read the verification's
 * id from the answer (the spec shows no registration answer; docs/decisions/042): kept, never reported as nothing.
 */

const gateway = gatewaysPerTest();

const REGISTER = `mutation($input: RegisterVerificationInput!, $key: UUID) {
  registerVerification(input: $input, idempotencyKey: $key) { verification { externalId workflowId } idempotencyKey upstreamIdempotencyKey replayed }
}`;

/** The registration answer with the id moved where the gateway does not look: `registration[0].ref`. */
const idElsewhere = (body: unknown) => {
  const { verificationExternalId, ...rest } = body as Record<string, unknown>;
  return { ...rest, registration: [{ ref: verificationExternalId }] };
};

const JSON_TYPE = { 'content-type': 'application/json' };

const registrations = (t: TestGateway) =>
  t.gateway.sandbox.verification!.requests.filter((r) => r.method === 'POST' && r.path === VERIFICATIONS_PATH).length;

describe('a verification registration answered 2xx without a readable id', () => {
  it('is kept: UPSTREAM_ANSWER_INCOMPLETE with the upstream key, and a retry with the same key replays it without registering again', async () => {
    const t = await gateway();
    const sandbox = t.gateway.sandbox.verification!;
    sandbox.faults.enqueueFor(VERIFICATIONS_PATH, { alter: idElsewhere });
    const key = randomUUID();
    const input = { workflowId: 'wf-kept', applicant: { lastName: 'Kept' } };

    const first = await t.graphql(REGISTER, { input, key });
    expect(first.errors![0]!.extensions).toMatchObject({
      code: 'UPSTREAM_ANSWER_INCOMPLETE',
      upstream: 'verification',
      status: 200,
      variable: 'VERIFICATION_EXTERNAL_ID_PATH',
      idempotencyKey: key,
      upstreamIdempotencyKey: sandbox.requests[0]!.headers['idempotency-key'],
    });
    const registered = sandbox.verifications();
    expect(registered).toHaveLength(1);
    expect(first.errors![0]!.extensions!.answer).toMatchObject({ registration: [{ ref: registered[0]!.externalId }] });
    // The applicant's personal data is not kept with the answer.
    expect(JSON.stringify(first.errors![0]!.extensions!.answer)).not.toContain('Kept');

    const again = await t.graphql(REGISTER, { input, key });
    expect(again.errors![0]!.extensions).toMatchObject({ code: 'UPSTREAM_ANSWER_INCOMPLETE', idempotencyKey: key });
    expect(registrations(t), 'nothing is sent again').toBe(1);
    expect(sandbox.verifications()).toHaveLength(1);
  });

  it('is recorded once VERIFICATION_EXTERNAL_ID_PATH is configured: the retry with the same key reads the kept answer', async () => {
    const dataDir = tempDataDir();
    const key = randomUUID();
    const input = { workflowId: 'wf-completed', applicant: { lastName: 'Later' } };
    const before = await gateway({ DATA_DIR: dataDir });
    before.gateway.sandbox.verification!.faults.enqueueFor(VERIFICATIONS_PATH, { alter: idElsewhere });
    expect((await before.graphql(REGISTER, { input, key })).errors![0]!.extensions!.code).toBe(
      'UPSTREAM_ANSWER_INCOMPLETE',
    );
    const upstreamId = before.gateway.sandbox.verification!.verifications()[0]!.externalId;
    await before.close();

    const after = await gateway({ DATA_DIR: dataDir, VERIFICATION_EXTERNAL_ID_PATH: 'registration.0.ref' });
    const res = await after.graphql(REGISTER, { input, key });
    expect(res.errors).toBeUndefined();
    expect(res.data!.registerVerification).toMatchObject({
      verification: { externalId: upstreamId, workflowId: 'wf-completed' },
      replayed: true,
    });
    expect(registrations(after), 'read from the kept answer, not sent again').toBe(0);
    expect((await after.gateway.services.ledger.get(upstreamId))?.kind).toBe('verification');
  });
});

describe('a verification whose address is called back before its id is read', () => {
  it('keeps the callback under the id it names, and the registration read later has it as its completion', async () => {
    const dataDir = tempDataDir();
    const key = randomUUID();
    const input = { workflowId: 'wf-early', applicant: { lastName: 'Early' } };
    const before = await gateway({ DATA_DIR: dataDir, SANDBOX_CALLBACK_DELAY_MS: '600000' });
    const sandbox = before.gateway.sandbox.verification!;
    sandbox.faults.enqueueFor(VERIFICATIONS_PATH, { alter: idElsewhere });
    expect((await before.graphql(REGISTER, { input, key })).errors![0]!.extensions!.code).toBe(
      'UPSTREAM_ANSWER_INCOMPLETE',
    );
    const { externalId: upstreamId, callbackUrl } = sandbox.verifications()[0]!;
    const post = async (body: unknown) => {
      const res = await fetch(callbackUrl!, { method: 'POST', headers: JSON_TYPE, body: JSON.stringify(body) });
      return res.status;
    };
    expect(await post({ verificationExternalId: upstreamId, status: 'EARLY' })).toBe(204);
    await before.close();

    const after = await gateway({
      DATA_DIR: dataDir,
      VERIFICATION_EXTERNAL_ID_PATH: 'registration.0.ref',
      SANDBOX_CALLBACK_DELAY_MS: '600000',
    });
    expect((await after.graphql(REGISTER, { input, key })).errors).toBeUndefined();
    const completion = async () =>
      (
        await after.graphql(`query($id: ID!) { node(id: $id) { ... on Verification { completion { status } } } }`, {
          id: upstreamId,
        })
      ).data!.node.completion;
    expect(await completion()).toEqual({ status: 'EARLY' });
    // The address is its verification's: a body without an id is its, one naming another verification is refused.
    const address = callbackUrl!.replace(/^http:\/\/[^/]+/, after.url);
    const again = async (body: unknown) =>
      (await fetch(address, { method: 'POST', headers: JSON_TYPE, body: JSON.stringify(body) })).status;
    expect(await again({ status: 'LATER' })).toBe(204);
    expect(await again({ verificationExternalId: 'another', status: 'X' })).toBe(400);
    expect(await completion()).toEqual({ status: 'LATER' });
  });
});

describe('a verification registration answered with its id inside jobResults', () => {
  it('is recorded under that id, which the spec puts beside the status of acceptance the gateway reads there', async () => {
    const t = await gateway();
    const sandbox = t.gateway.sandbox.verification!;
    sandbox.faults.enqueueFor(VERIFICATIONS_PATH, {
      alter: (body) => {
        const { verificationExternalId, jobResults, ...rest } = body as Record<string, any>;
        return { ...rest, jobResults: { ...jobResults, id: 'job-1', verificationExternalId } };
      },
    });
    const res = await t.graphql(REGISTER, { input: { workflowId: 'wf-jobs', applicant: { lastName: 'Jobs' } } });
    expect(res.errors).toBeUndefined();
    const upstreamId = sandbox.verifications()[0]!.externalId;
    expect(res.data!.registerVerification.verification).toEqual({ externalId: upstreamId, workflowId: 'wf-jobs' });
    expect((await t.gateway.services.ledger.get(upstreamId))?.kind).toBe('verification');
  });
});

describe('the verification *_PATH variables', () => {
  it('VERIFICATION_CALLBACK_URL_PATH puts the callbackUrl where it names, and VERIFICATION_RESULTS_PATH reads the results list there', async () => {
    const t = await gateway({
      VERIFICATION_CALLBACK_URL_PATH: 'callback.url',
      VERIFICATION_RESULTS_PATH: 'payload.entries',
    });
    const sandbox = t.gateway.sandbox.verification!;
    const res = await t.graphql(REGISTER, { input: { workflowId: 'wf-paths', applicant: { lastName: 'Paths' } } });
    expect(res.errors).toBeUndefined();
    const externalId = res.data!.registerVerification.verification.externalId as string;
    const sent = sandbox.requests.find((r) => r.path === VERIFICATIONS_PATH)!.body as Record<string, any>;
    expect(sent.callbackUrl).toBeUndefined();
    expect(sent.callback.url).toMatch(new RegExp(`^${t.url}/webhooks/verification/[A-Za-z0-9_-]+$`));

    sandbox.faults.enqueueFor(RESULTS_PATH, {
      alter: (body) => ({ payload: { entries: (body as { results: unknown[] }).results } }),
    });
    const results = await t.graphql(
      `query($ids: [ID!]!) { verificationResults(externalIds: $ids) { externalId status } }`,
      { ids: [externalId] },
    );
    expect(results.errors).toBeUndefined();
    expect(results.data!.verificationResults).toEqual([{ externalId, status: expect.any(String) }]);
  });
});
