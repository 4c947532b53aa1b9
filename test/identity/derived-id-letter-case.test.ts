import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { RESULTS_PATH } from '../../src/sandbox/verification.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

/**
 * The id the gateway sends upstream for an app's own external id is a UUID it derives, written in lowercase. A UUID is
 * the same whatever the letter case of its hex digits (RFC 9562), and the spec says nothing of case: an upstream that
 * echoes the id in capitals, in a result or in a callback, names the same verification.
 */

const REGISTER = `mutation($input: RegisterVerificationInput!) {
  registerVerification(input: $input) { verification { id externalId } }
}`;
const RESULTS = `query($ids: [ID!]!) { verificationResults(externalIds: $ids) { externalId status } }`;
const COMPLETION = `query($id: ID!) { node(id: $id) { ... on Verification { completion { externalId status } } } }`;

/** The sandbox's results answer with every id in capitals. */
const shouted = (body: unknown) => ({
  results: (body as { results: Array<Record<string, unknown>> }).results.map((item) => ({
    ...item,
    verificationExternalId: String(item.verificationExternalId).toUpperCase(),
  })),
});

describe('derived verification ids in another letter case', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({ SANDBOX_CALLBACK_DELAY_MS: '600000' });
  });
  afterAll(() => t.close());

  /** Registers `externalId`; its node id, the derived id sent upstream and the callbackUrl handed out. */
  async function register(externalId: string): Promise<{ node: string; sent: string; callbackUrl: string }> {
    const res = await t.graphql(REGISTER, {
      input: { workflowId: 'wf-case', applicant: { lastName: 'Case' }, externalId },
    });
    expect(res.errors).toBeUndefined();
    const sent = t.gateway.sandbox.verification!.verifications().at(-1)!;
    expect(sent.externalId).toMatch(/^[0-9a-f-]{36}$/);
    const node = res.data!.registerVerification.verification.id as string;
    return { node, sent: sent.externalId, callbackUrl: sent.callbackUrl! };
  }

  it('reads a result whose id the upstream writes in capitals as the app’s own', async () => {
    await register('case-results');
    t.gateway.sandbox.verification!.faults.enqueueFor(RESULTS_PATH, { alter: shouted });
    const res = await t.graphql(RESULTS, { ids: ['case-results'] });
    expect(res.errors).toBeUndefined();
    expect(res.data!.verificationResults).toEqual([{ externalId: 'case-results', status: 'IN_PROGRESS' }]);
  });

  it('takes a callback naming the verification’s id in capitals, and still refuses one naming another', async () => {
    const { node, sent, callbackUrl } = await register('case-callback');
    const other = await register('case-other');
    const post = async (body: unknown) => {
      const res = await request(callbackUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      return { status: res.statusCode, text: await res.body.text() };
    };
    const refused = await post({ verificationExternalId: other.sent.toUpperCase(), status: 'OTHER' });
    expect(refused.status).toBe(400);
    expect(refused.text).toMatch(/names another verification/);
    const mixed = sent.slice(0, 18).toUpperCase() + sent.slice(18);
    for (const [id, status] of [
      [sent.toUpperCase(), 'UPPER'],
      [mixed, 'MIXED'],
    ]) {
      const res = await post({ verificationExternalId: id, status });
      expect(res.status, `${res.status} ${res.text}`).toBe(204);
      const read = await t.graphql(COMPLETION, { id: node });
      expect(read.data!.node.completion).toEqual({ externalId: 'case-callback', status });
    }
  });
});
