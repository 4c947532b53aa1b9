// A registration whose answer was lost (UPSTREAM_OUTCOME_UNKNOWN) may have been applied. The app's retry with the same
// key sends it once more, under the same external id, which the gateway derived from the app's own: a verification
// service that ignores the Idempotency-Key answers 409, since that id exists now. The 409 then says the first send was
// applied, and the id is known, so the verification is recorded and returned; before, the app was told CONFLICT and
// nothing was recorded, and the verification's results could never be read through the gateway.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { VERIFICATIONS_PATH } from '../../src/sandbox/verification.js';
import { startTestGateway, type GraphQLResponse, type TestGateway } from '../helpers/gateway.js';

const REGISTER = `mutation($input: RegisterVerificationInput!, $key: UUID) {
  registerVerification(input: $input, idempotencyKey: $key) {
    verification { id externalId workflowId status }
    replayed
  }
}`;
const RESULTS = `query($ids: [ID!]!) { verificationResults(externalIds: $ids) { externalId status } }`;

describe('a retried registration whose outcome was unknown, answered 409', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({ SANDBOX_CALLBACK_DELAY_MS: '600000' });
  });
  afterAll(() => t.close());

  const sandbox = () => t.gateway.sandbox.verification!;
  const registrations = () => sandbox().requests.filter((r) => r.method === 'POST' && r.path === VERIFICATIONS_PATH);
  /** The upstream's 409 for an id that exists, as a service that ignores Idempotency-Key answers the repeat. */
  const exists = (id: string) => ({
    status: 409,
    retryAfterSeconds: null,
    body: { code: 'VERIFICATION_EXISTS', domain: 'sandbox', details: `verification ${id} is already registered` },
  });

  it('records the verification under the id it sent, and its results can be read', async () => {
    const externalId = `lost-${randomUUID()}`;
    const input = { workflowId: 'wf-kyc', applicant: { lastName: 'Lost' }, externalId };
    const key = randomUUID();
    sandbox().faults.enqueueFor(VERIFICATIONS_PATH, 'reset-after');
    const first = await t.graphql(REGISTER, { input, key });
    expect(first.errors?.[0]?.extensions).toMatchObject({ code: 'UPSTREAM_OUTCOME_UNKNOWN', idempotencyKey: key });
    const sentId = (registrations().at(-1)!.body as { verificationExternalId: string }).verificationExternalId;

    sandbox().faults.enqueueFor(VERIFICATIONS_PATH, exists(sentId));
    const again = await t.graphql(REGISTER, { input, key });
    expect(again.errors).toBeUndefined();
    expect(again.data!.registerVerification.verification).toEqual({
      id: sentId,
      externalId,
      workflowId: 'wf-kyc',
      status: null,
    });
    expect(registrations()).toHaveLength(2);

    // The results are read through the gateway, and a third call replays without sending.
    const results = await t.graphql(RESULTS, { ids: [externalId] });
    expect(results.errors).toBeUndefined();
    expect(results.data!.verificationResults).toEqual([{ externalId, status: 'IN_PROGRESS' }]);
    const third = await t.graphql(REGISTER, { input, key });
    expect(third.data!.registerVerification).toMatchObject({ replayed: true, verification: { id: sentId } });
    expect(registrations()).toHaveLength(2);
  });

  it('says so in extensions.warnings, on the answer and on its replay; a registration answered as usual does not', async () => {
    const externalId = `warned-${randomUUID()}`;
    const input = { workflowId: 'wf-kyc', applicant: { lastName: 'Warned' }, externalId };
    const key = randomUUID();
    sandbox().faults.enqueueFor(VERIFICATIONS_PATH, 'reset-after');
    expect((await t.graphql(REGISTER, { input, key })).errors?.[0]?.extensions?.code).toBe('UPSTREAM_OUTCOME_UNKNOWN');
    const sentId = (registrations().at(-1)!.body as { verificationExternalId: string }).verificationExternalId;

    sandbox().faults.enqueueFor(VERIFICATIONS_PATH, exists(sentId));
    const warning = {
      code: 'UPSTREAM_ANSWER_INCOMPLETE',
      message: expect.stringMatching(/already registered.*status is not known/),
      path: ['registerVerification', 'verification'],
      upstream: 'verification',
      id: sentId,
      missing: ['status', 'jobResults', 'raw'],
    };
    const again = (await t.graphql(REGISTER, { input, key })) as GraphQLResponse & { extensions?: any };
    expect(again.errors).toBeUndefined();
    expect(again.extensions?.warnings).toEqual([warning]);
    const replay = (await t.graphql(REGISTER, { input, key })) as GraphQLResponse & { extensions?: any };
    expect(replay.data!.registerVerification.replayed).toBe(true);
    expect(replay.extensions?.warnings).toEqual([warning]);

    // A registration whose answer lacks a status is not one whose status is unknown for this reason.
    sandbox().faults.enqueueFor(VERIFICATIONS_PATH, { alter: (b) => ({ ...(b as object), jobResults: null }) });
    const plain = (await t.graphql(REGISTER, {
      input: { ...input, externalId: `plain-${randomUUID()}` },
      key: randomUUID(),
    })) as GraphQLResponse & { extensions?: any };
    expect(plain.errors).toBeUndefined();
    expect(plain.extensions?.warnings).toBeUndefined();
  });

  it('a 409 on a first send is CONFLICT, as before, and records nothing', async () => {
    const externalId = `taken-${randomUUID()}`;
    const input = { workflowId: 'wf-kyc', applicant: { lastName: 'Taken' }, externalId };
    sandbox().faults.enqueueFor(VERIFICATIONS_PATH, exists('x'));
    const res = await t.graphql(REGISTER, { input, key: randomUUID() });
    expect(res.errors?.[0]?.extensions).toMatchObject({ code: 'CONFLICT', status: 409 });
    const results = await t.graphql(RESULTS, { ids: [externalId] });
    expect(results.data!.verificationResults).toEqual([null]);
  });

  it('a 409 on a retry whose verification the gateway already recorded under another key is CONFLICT', async () => {
    const externalId = `twice-${randomUUID()}`;
    const input = { workflowId: 'wf-kyc', applicant: { lastName: 'Twice' }, externalId };
    const key = randomUUID();
    // The first send with `key` is lost before it reaches the service; another key then registers the id.
    sandbox().faults.enqueueFor(VERIFICATIONS_PATH, 'reset');
    const first = await t.graphql(REGISTER, { input, key });
    expect(first.errors?.[0]?.extensions).toMatchObject({ code: 'UPSTREAM_OUTCOME_UNKNOWN' });
    const other = await t.graphql(REGISTER, { input, key: randomUUID() });
    expect(other.errors).toBeUndefined();
    const sentId = other.data!.registerVerification.verification.id as string;

    sandbox().faults.enqueueFor(VERIFICATIONS_PATH, exists(sentId));
    const again = await t.graphql(REGISTER, { input, key });
    expect(again.errors?.[0]?.extensions).toMatchObject({ code: 'CONFLICT', status: 409 });
  });
});

describe('a registration repeated within its call, on a verification service declared to honour the key', () => {
  it('records the verification when the repeat of a send whose answer was lost is answered 409', async () => {
    const t = await startTestGateway({ SANDBOX_CALLBACK_DELAY_MS: '600000', IDEMPOTENT_UPSTREAMS: 'verification' });
    try {
      const sandbox = t.gateway.sandbox.verification!;
      const externalId = `repeated-${randomUUID()}`;
      const input = { workflowId: 'wf-kyc', applicant: { lastName: 'Repeated' }, externalId };
      sandbox.faults.enqueueFor(VERIFICATIONS_PATH, 'reset-after', {
        status: 409,
        retryAfterSeconds: null,
        body: { code: 'VERIFICATION_EXISTS', domain: 'sandbox', details: 'already registered' },
      });
      const res = await t.graphql(REGISTER, { input, key: randomUUID() });
      expect(res.errors).toBeUndefined();
      const sent = sandbox.requests.filter((r) => r.method === 'POST' && r.path === VERIFICATIONS_PATH);
      expect(sent).toHaveLength(2);
      const sentId = (sent[0]!.body as { verificationExternalId: string }).verificationExternalId;
      expect(res.data!.registerVerification.verification).toMatchObject({ id: sentId, externalId });
    } finally {
      await t.close();
    }
  });
});
