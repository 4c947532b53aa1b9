// A verification service may call back before it has answered the registration (a fast workflow, or a platform that
// answers late). When the app gave no external id, the callbackUrl is bound to its verification only once the answer
// names the id the service assigned; a callback that names none (the gateway takes such a body on a bound address: the
// address names the verification) was answered 400 in that window, which a sender does not retry, and the result was
// lost. While a registration of the address's app is in flight it is answered 503 with Retry-After, as an
// identification callback that names an identification not stored yet is, and the sender's retry is kept once the
// answer is stored.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { TestGateway } from '../helpers/gateway.js';
import { gatewayOnVerificationStub, postCallback } from '../helpers/identity.js';

const API_KEY = 'early-callback-app';
const REGISTER = `mutation {
  registerVerification(input: { workflowId: "wf-fast", applicant: { lastName: "Early" } }) {
    verification { externalId }
  }
}`;
const COMPLETION = `query($id: ID!) { node(id: $id) { ... on Verification { externalId completion { status } } } }`;
const RESULT = { status: 'COMPLETED', decision: 'APPROVED' };

describe('a verification callback that arrives before the registration is answered', () => {
  let gw: TestGateway;
  let close: () => Promise<void>;
  /** What the gateway answered the callback the service sent before its own answer, and the address it went to. */
  const early: { url?: string; answer?: Awaited<ReturnType<typeof postCallback>> } = {};

  beforeAll(async () => {
    // Assigns the id itself; calls back (with a body that does not name the verification) before it answers.
    ({ gw, close } = await gatewayOnVerificationStub(API_KEY, (sent: { callbackUrl: string }, res) => {
      early.url = sent.callbackUrl;
      void postCallback(sent.callbackUrl, RESULT).then((answer) => {
        early.answer = answer;
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ verificationExternalId: 'assigned-7', jobResults: { status: 'ACCEPTED' } }));
      });
    }));
  });
  afterAll(() => close());

  it('is answered 503 with Retry-After (the sender retries), not 400, and its retry is kept once the answer is stored', async () => {
    const res = await gw.graphql(REGISTER, {}, { key: API_KEY });
    expect(res.errors).toBeUndefined();
    expect(res.data!.registerVerification.verification.externalId).toBe('assigned-7');

    expect(early.answer!.status).toBe(503);
    expect(Number(early.answer!.retryAfter)).toBeGreaterThanOrEqual(1);
    expect(early.answer!.body).toMatchObject({ error: 'temporarily_unavailable' });
    const before = await gw.graphql(COMPLETION, { id: 'assigned-7' }, { key: API_KEY });
    expect(before.data!.node).toEqual({ externalId: 'assigned-7', completion: null });

    // The sender's retry, now that the registration is stored, is the verification's result.
    expect((await postCallback(early.url!, RESULT)).status).toBe(204);
    const after = await gw.graphql(COMPLETION, { id: 'assigned-7' }, { key: API_KEY });
    expect(after.data!.node).toEqual({ externalId: 'assigned-7', completion: { status: 'COMPLETED' } });
  });
});
