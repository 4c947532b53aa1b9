// A bare `id` may be a job's, a request's or a row's; the verification's id is the one under its own name
// (verificationExternalId, externalId). An answer holding both, the bare one at the top level and the named one nested
// (under verification, data or result), used to be read by the bare one: a registration without an externalId was
// recorded under the request's id, its callbackUrl bound to it (so every callback naming the verification was refused),
// and a results item answered null. The named id now wins wherever it is, as a callback's already did.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { RESULTS_PATH, VERIFICATIONS_PATH } from '../../src/sandbox/verification.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';

const REGISTER = `mutation($input: RegisterVerificationInput!) {
  registerVerification(input: $input) { verification { externalId status } }
}`;
const RESULTS = `query($ids: [ID!]!) { verificationResults(externalIds: $ids) { externalId status } }`;

describe('an answer holding a bare id at the top level and the verification’s id nested under its own name', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({ SANDBOX_CALLBACK_DELAY_MS: '600000' });
  });
  afterAll(() => t.close());

  it('records the registration under the named id, and its callbackUrl takes the callback naming it', async () => {
    const sandbox = t.gateway.sandbox.verification!;
    sandbox.faults.enqueueFor(VERIFICATIONS_PATH, { alter: (body) => ({ id: 'request-77', verification: body }) });
    const res = await t.graphql(REGISTER, { input: { workflowId: 'wf-bare-id', applicant: { lastName: 'Bare' } } });
    expect(res.errors).toBeUndefined();
    const upstreamId = sandbox.verifications().at(-1)!.externalId;
    expect(res.data!.registerVerification.verification).toEqual({ externalId: upstreamId, status: 'ACCEPTED' });

    // The sandbox calls back with `{ verificationExternalId: <its id>, status: 'COMPLETED', … }`.
    await sandbox.complete(upstreamId);
    await waitFor(() => sandbox.callbacks.length > 0, 20_000, 'the callback');
    expect(sandbox.callbacks.map((c) => c.status)).toEqual([204]);
    const read = await t.graphql(
      `query($id: ID!) { verificationResults(externalIds: [$id]) { verification { completion { status } } } }`,
      { id: upstreamId },
    );
    expect(read.errors).toBeUndefined();
    expect(read.data!.verificationResults[0].verification.completion).toEqual({ status: 'COMPLETED' });
  });

  it('files a results item under the named id, not its row’s id', async () => {
    const sandbox = t.gateway.sandbox.verification!;
    const reg = await t.graphql(REGISTER, {
      input: { workflowId: 'wf-bare-id', applicant: { lastName: 'Row' }, externalId: 'bare-1' },
    });
    expect(reg.errors).toBeUndefined();
    sandbox.faults.enqueueFor(RESULTS_PATH, {
      alter: (body) => ({
        results: (body as { results: unknown[] }).results.map((item, i) => ({ id: `row-${i}`, verification: item })),
      }),
    });
    const res = await t.graphql(RESULTS, { ids: ['bare-1'] });
    expect(res.errors).toBeUndefined();
    expect(res.data!.verificationResults).toEqual([{ externalId: 'bare-1', status: 'IN_PROGRESS' }]);
  });
});
