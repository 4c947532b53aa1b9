import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { VerificationSandbox } from '../../src/sandbox/verification.js';
import { M, ok } from '../helpers/cloud.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

const RESULTS = '/api/v2/verifications/results';
const REGISTER = `mutation($input: RegisterVerificationInput!) { registerVerification(input: $input) { verification { externalId } } }`;

// A results lookup the upstream fails is an error on the entries it could not read: each is null with its error at
// its own path, and nothing else of the operation is lost (the list, its other entries, the sibling fields).
describe('a verification results call that fails nulls only the entries it was asked for', () => {
  let t: TestGateway;
  let sandbox: VerificationSandbox;
  beforeAll(async () => {
    t = await startTestGateway({
      UPSTREAM_MAX_RETRIES: '0',
      VERIFICATION_RESULTS_BATCH_SIZE: '2',
      SANDBOX_CALLBACK_DELAY_MS: '600000',
    });
    sandbox = t.gateway.sandbox.verification!;
    for (const externalId of ['v1', 'v2', 'v3']) {
      const res = await t.graphql(REGISTER, { input: { workflowId: 'wf-kyc', applicant: { n: 1 }, externalId } });
      expect(res.errors).toBeUndefined();
    }
  });
  afterAll(() => t.close());

  it('keeps the sibling fields of the operation and names each unread entry', async () => {
    const project = (await ok(t, M.project, { input: { name: 'beside-results' } })).project.id as string;
    sandbox.faults.enqueueFor(RESULTS, { status: 503, retryAfterSeconds: null });
    const res = await t.graphql(
      `query($p: ID!) { project(id: $p) { name } verificationResults(externalIds: ["v1"]) { externalId } }`,
      { p: project },
    );
    expect(res.data).toEqual({ project: { name: 'beside-results' }, verificationResults: [null] });
    expect(res.errors).toHaveLength(1);
    expect(res.errors![0]).toMatchObject({
      path: ['verificationResults', 0],
      extensions: { code: 'UPSTREAM_UNAVAILABLE', upstream: 'verification' },
    });
  });

  it('keeps the entries another batch of the same operation read', async () => {
    sandbox.faults.enqueueFor(RESULTS, { status: 503, retryAfterSeconds: null });
    const res = await t.graphql(`{ verificationResults(externalIds: ["v1", "v2", "v3"]) { externalId } }`);
    // Two calls (at most 2 ids each): whichever came first failed, the other answered.
    const list = res.data!.verificationResults as ({ externalId: string } | null)[];
    const failed = list.flatMap((r, i) => (r === null ? [i] : []));
    expect([[0, 1], [2]]).toContainEqual(failed);
    for (const i of [0, 1, 2].filter((i) => !failed.includes(i))) expect(list[i]).toEqual({ externalId: `v${i + 1}` });
    expect(res.errors!.map((e) => e.path)).toEqual(failed.map((i) => ['verificationResults', i]));
    expect(res.errors!.every((e) => e.extensions!.code === 'UPSTREAM_UNAVAILABLE')).toBe(true);
  });
});
