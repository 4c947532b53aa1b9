// A verification service may call back before it answers the registration, and name in that callback the id it is
// assigning. The address is bound to its verification only by the answer; a callback naming an id on it before then was
// taken at once and bound the address to that id. When the service then refused the registration (4xx), the address
// was forgotten but the callback stayed stored: a result of a verification that does not exist, delivered to
// `verificationCompleted` and read as that id's completion. While the address's registration is in flight such a
// callback is answered 503 with Retry-After, as one naming no id is: the sender's retry finds the address forgotten
// (404) after a refusal, or bound to its verification after an answer.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { TestGateway } from '../helpers/gateway.js';
import { gatewayOnVerificationStub, postCallback } from '../helpers/identity.js';

const API_KEY = 'early-named-app';
const REGISTER = `mutation($input: RegisterVerificationInput!) {
  registerVerification(input: $input) { verification { id externalId } }
}`;
const COMPLETION = `query($id: ID!) { node(id: $id) { ... on Verification { externalId completion { status } } } }`;

describe('a verification callback naming its id before the registration is answered', () => {
  let gw: TestGateway;
  let close: () => Promise<void>;
  /**
   * How the service answers the next registration, after calling back on its address with the id it assigns (`id`), or
   * with the id it was sent (null: a registration under the app's own `externalId`).
   */
  let next: { id: string | null; refuse: boolean };
  /** The address the service was sent, the id its early callback named, and what the gateway answered it. */
  let early: { url: string; named: string; answer: Awaited<ReturnType<typeof postCallback>> } | undefined;

  beforeAll(async () => {
    ({ gw, close } = await gatewayOnVerificationStub(
      API_KEY,
      (
        { callbackUrl, verificationExternalId: sent }: { callbackUrl: string; verificationExternalId?: string },
        res,
      ) => {
        const id = next.id ?? sent!;
        const { refuse } = next;
        void postCallback(callbackUrl, { verificationExternalId: id, status: 'EARLY' }).then((answer) => {
          early = { url: callbackUrl, named: id, answer };
          if (refuse) {
            res.writeHead(422, { 'content-type': 'application/json' });
            res.end(JSON.stringify({ code: 'APPLICANT_INVALID', message: 'the applicant data is incomplete' }));
            return;
          }
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ verificationExternalId: id, jobResults: { status: 'ACCEPTED' } }));
        });
      },
    ));
  });
  afterAll(() => close());

  const register = (workflowId: string, externalId?: string) =>
    gw.graphql(
      REGISTER,
      { input: { workflowId, applicant: { lastName: 'Early' }, ...(externalId ? { externalId } : {}) } },
      { key: API_KEY },
    );

  async function verificationEvents(key: string): Promise<number> {
    const rows = await gw.gateway.services.store.db
      .selectFrom('events')
      .select('seq')
      .where('kind', '=', 'verification')
      .where('key', '=', key)
      .execute();
    return rows.length;
  }

  it('keeps nothing of it when the service then refuses the registration: 503 first, then the address is gone', async () => {
    next = { id: 'refused-1', refuse: true };
    early = undefined;
    const res = await register('wf-refused');
    expect(res.errors![0]!.extensions!.code).toBe('UPSTREAM_REJECTED');

    expect(early!.answer.status).toBe(503);
    expect(Number(early!.answer.retryAfter)).toBeGreaterThanOrEqual(1);
    expect(await verificationEvents('refused-1')).toBe(0);
    // The sender's retry: the address of a refused registration is forgotten, and nothing is stored.
    const retry = await postCallback(early!.url, { verificationExternalId: 'refused-1', status: 'EARLY' });
    expect(retry.status).toBe(404);
    expect(await verificationEvents('refused-1')).toBe(0);
  });

  it('keeps its retry as the result once the registration is answered', async () => {
    next = { id: 'accepted-1', refuse: false };
    early = undefined;
    const res = await register('wf-accepted');
    expect(res.errors).toBeUndefined();
    expect(res.data!.registerVerification.verification.externalId).toBe('accepted-1');

    expect(early!.answer.status).toBe(503);
    expect(await verificationEvents('accepted-1')).toBe(0);
    const retry = await postCallback(early!.url, { verificationExternalId: 'accepted-1', status: 'EARLY' });
    expect(retry.status).toBe(204);
    const read = await gw.graphql(COMPLETION, { id: 'accepted-1' }, { key: API_KEY });
    expect(read.data!.node).toEqual({ externalId: 'accepted-1', completion: { status: 'EARLY' } });
  });

  // An address issued for a registration under the app's own id is bound to that id from the start, and took such a
  // callback at once: after the service refused the registration, the callback stayed, and a registration of the same
  // id that the service then accepted (the app corrected the applicant's data) read it as its own completion.
  it("under the app's own externalId: 503 while in flight too, so a refused registration leaves no result to the next one of its id", async () => {
    next = { id: null, refuse: true };
    early = undefined;
    const refused = await register('wf-own-refused', 'order-7');
    expect(refused.errors![0]!.extensions!.code).toBe('UPSTREAM_REJECTED');
    expect(early!.answer.status).toBe(503);
    expect(Number(early!.answer.retryAfter)).toBeGreaterThanOrEqual(1);
    expect(await verificationEvents('order-7')).toBe(0);

    next = { id: null, refuse: false };
    early = undefined;
    const accepted = await register('wf-own-accepted', 'order-7');
    expect(accepted.errors).toBeUndefined();
    expect(early!.answer.status).toBe(503);
    const { id } = accepted.data!.registerVerification.verification;
    const read = await gw.graphql(COMPLETION, { id }, { key: API_KEY });
    expect(read.data!.node).toEqual({ externalId: 'order-7', completion: null });
    expect(await verificationEvents('order-7')).toBe(0);
    // The sender's retry, once the registration is answered, is its result.
    const retry = await postCallback(early!.url, { verificationExternalId: early!.named, status: 'EARLY' });
    expect(retry.status).toBe(204);
    expect(await verificationEvents('order-7')).toBe(1);
    const after = await gw.graphql(COMPLETION, { id }, { key: API_KEY });
    expect(after.data!.node).toEqual({ externalId: 'order-7', completion: { status: 'EARLY' } });
  });
});
