// Tenancy on the seams test/tenancy/every-surface.test.ts and mcp-surfaces.test.ts leave out: one operation that asks
// for another app's ids among its own and unknown ones (the DataLoader batches: latestMany in src/events/log.ts, the
// ledger's getMany), identificationCompleted resumed from a cursor the owner's stream handed out (graphql-ws `after`,
// SSE Last-Event-ID in both modes), and MCP's wait_for_events waiting from now while another app's events arrive.
import { randomUUID } from 'node:crypto';
import { createClient as createSseClient } from 'graphql-sse';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { subscribe } from '../helpers/identity.js';
import { mcpClientsPerTest } from '../helpers/mcp.js';
import { wsClient } from '../helpers/mobile-id.js';
import { cursorNow, deliveredEverywhere } from '../helpers/resumable.js';
import { subscribers, waitFor } from '../helpers/wait.js';

const A = 'key-batch-app-a-0123456789';
const B = 'key-batch-app-b-9876543210';

const REGISTER = `mutation($input: RegisterVerificationInput!) {
  registerVerification(input: $input) { verification { id externalId } }
}`;
/** An identification of a workflow of the app's own: the sandbox keeps one callback address per workflow. */
const IDENTIFY = `mutation($wf: String!) { createIdentification(input: { workflowId: $wf }) { identification { id } } }`;
const identify = async (key: string) =>
  (await ok(key, IDENTIFY, { wf: `wf-batch-${key}` })).createIdentification.identification.id as string;
const COMPLETE_MOBILE_ID = `mutation($id: String!) { sandboxCompleteMobileIdAuthentication(authReqId: $id) { accepted } }`;
/** Three of each kind in one operation: each list and alias set is one DataLoader batch. */
const BATCH = `query($v: [ID!]!, $n0: ID!, $n1: ID!, $n2: ID!, $i0: ID!, $i1: ID!, $i2: ID!,
  $m0: String!, $m1: String!, $m2: String!) {
  verificationResults(externalIds: $v) { externalId status }
  n0: node(id: $n0) { id ... on Verification { externalId completion { status payload } } }
  n1: node(id: $n1) { id ... on Verification { externalId completion { status payload } } }
  n2: node(id: $n2) { id ... on Verification { externalId completion { status payload } } }
  i0: identification(id: $i0) { id status completion { status payload } }
  i1: identification(id: $i1) { id status completion { status payload } }
  i2: identification(id: $i2) { id status completion { status payload } }
  m0: mobileIdAuthentication(authReqId: $m0) { __typename ... on MobileIdAuthenticated { authReqId } }
  m1: mobileIdAuthentication(authReqId: $m1) { __typename ... on MobileIdAuthenticated { authReqId } }
  m2: mobileIdAuthentication(authReqId: $m2) { __typename ... on MobileIdAuthenticated { authReqId } }
}`;

let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway({ GATEWAY_API_KEYS: `${A},${B}`, SANDBOX_CALLBACK_DELAY_MS: '600000' });
});
afterAll(() => gw?.close());

async function ok(key: string, query: string, variables: Record<string, unknown> = {}): Promise<any> {
  const res = await gw.graphql(query, variables, { key });
  expect(res.errors).toBeUndefined();
  return res.data!;
}

/** A completed thing of each kind `key` made: a verification of `externalId`, an identification, a mobile-ID result. */
async function completedBy(key: string, externalId: string) {
  const input = { workflowId: 'wf-kyc', applicant: { lastName: 'Petrova' }, externalId };
  const verification = (await ok(key, REGISTER, { input })).registerVerification.verification.id as string;
  await gw.gateway.sandbox.verification!.complete(verification);
  const identification = await identify(key);
  expect(await gw.gateway.sandbox.identification!.complete(identification)).not.toBeNull();
  const authReqId = `auth-${randomUUID()}`;
  await ok(key, COMPLETE_MOBILE_ID, { id: authReqId });
  return { externalId, verification, identification, authReqId };
}

describe('one operation naming another app’s ids beside its own (the DataLoader batches)', () => {
  it("B's batch of A's, its own and unknown ids: A's read as the unknown ones, byte for byte; its own are whole", async () => {
    // Both apps use one external id, and A's callback on it is the newer: the batch must still find B's own.
    const shared = `customer-${randomUUID()}`;
    const b = await completedBy(B, shared);
    const a = await completedBy(A, shared);
    const aOnly = await completedBy(A, `customer-${randomUUID()}`);
    await deliveredEverywhere(gw);

    const asked = (theirs: { v: string; n: string; i: string; m: string }) => ({
      v: [theirs.v, b.externalId, `customer-${randomUUID()}`],
      n0: theirs.n,
      n1: b.verification,
      n2: randomUUID(),
      i0: theirs.i,
      i1: b.identification,
      i2: randomUUID(),
      m0: theirs.m,
      m1: b.authReqId,
      m2: `auth-${randomUUID()}`,
    });
    const mine = await ok(
      A,
      BATCH,
      asked({ v: aOnly.externalId, n: a.verification, i: a.identification, m: a.authReqId }),
    );
    expect(mine.n0.completion, "the owner reads its verification's completion").not.toBeNull();
    expect(mine.i0.completion, "the owner reads its identification's completion").not.toBeNull();
    expect(mine.m0).toMatchObject({ authReqId: a.authReqId });
    expect(mine.verificationResults[0]).toMatchObject({ externalId: aOnly.externalId });

    const theirVariables = asked({ v: aOnly.externalId, n: a.verification, i: a.identification, m: a.authReqId });
    const unknownVariables = {
      ...theirVariables,
      v: [`customer-${randomUUID()}`, ...theirVariables.v.slice(1)],
      n0: randomUUID(),
      i0: randomUUID(),
      m0: `auth-${randomUUID()}`,
    };
    const theirs = await gw.graphql(BATCH, theirVariables, { key: B });
    const unknown = await gw.graphql(BATCH, unknownVariables, { key: B });
    expect(theirs.errors).toBeUndefined();
    const data = theirs.data!;
    expect([data.verificationResults[0], data.n0, data.i0, data.m0]).toEqual([null, null, null, null]);
    expect(data.verificationResults[1]).toMatchObject({ externalId: shared });
    expect(data.n1).toMatchObject({ externalId: shared });
    expect(data.n1.completion).not.toBeNull();
    expect(data.i1.completion).not.toBeNull();
    expect(data.m1).toMatchObject({ authReqId: b.authReqId });
    expect([data.verificationResults[2], data.n2, data.i2, data.m2]).toEqual([null, null, null, null]);
    // B's own completion on the shared external id is its own event, not A's newer one.
    expect(data.n1.completion).toEqual((await ok(B, BATCH, { ...unknownVariables, n1: b.verification })).n1.completion);
    expect(JSON.stringify(theirs)).toBe(JSON.stringify(unknown));
  });
});

describe('identificationCompleted resumed from a cursor of the owner’s stream', () => {
  const COMPLETED = `subscription($id: ID, $after: String) {
    identificationCompleted(id: $id, after: $after) { id status payload }
  }`;
  const SSE_COMPLETED = `subscription($id: ID) { identificationCompleted(id: $id) { id status payload } }`;

  it('over graphql-ws (after) and SSE in both modes (Last-Event-ID): keyed and over every id, B gets only its own', async () => {
    const theirs = await identify(A);
    const own = await identify(B);
    // A's stream hands out the cursor of its first completion; its second comes after that cursor.
    const owner = wsClient(gw, { key: A });
    const clients: Array<{ dispose(): unknown }> = [owner];
    try {
      const ownerStream = subscribe(owner, COMPLETED, { id: theirs });
      await waitFor(() => subscribers(gw, 'identification', theirs) >= 1, 20_000, "A's subscription");
      let cursor: string | undefined;
      const cursors: string[] = [];
      owner.subscribe(
        { query: COMPLETED, variables: {} },
        {
          next: (v) => void cursors.push((v.extensions as { cursor: string }).cursor),
          error: () => undefined,
          complete: () => undefined,
        },
      );
      await waitFor(() => subscribers(gw, 'identification', null) >= 1, 20_000, "A's stream over every id");
      const before = cursorNow(gw);
      await gw.gateway.sandbox.identification!.complete(theirs, { n: 'a1' });
      await waitFor(() => cursors.length === 1, 20_000, "A's first event");
      cursor = cursors[0]!;
      await gw.gateway.sandbox.identification!.complete(theirs, { n: 'a2' });
      await waitFor(() => ownerStream.received.length === 2, 20_000, "A's two events");
      expect(ownerStream.received.map((r) => r.identificationCompleted.payload.n)).toEqual(['a1', 'a2']);
      await deliveredEverywhere(gw);

      const ws = wsClient(gw, { key: B });
      clients.push(ws);
      const got: unknown[][] = [];
      const seen = (i: number) => (value: unknown) => void got[i]!.push(value);
      const resumes = [before, cursor];
      let n = 0;
      for (const after of resumes) {
        for (const id of [theirs, own, undefined]) {
          const i = n++;
          got[i] = [];
          ws.subscribe(
            { query: COMPLETED, variables: { ...(id ? { id } : {}), after } },
            { next: seen(i), error: seen(i), complete: () => undefined },
          );
          for (const singleConnection of [false, true]) {
            const j = n++;
            got[j] = [];
            const sse = createSseClient({
              url: `${gw.url}/graphql/stream`,
              singleConnection,
              retryAttempts: 0,
              headers: { authorization: `Bearer ${B}`, 'last-event-id': after },
            });
            clients.push(sse);
            sse.subscribe(
              { query: SSE_COMPLETED, variables: id ? { id } : {} },
              { next: seen(j), error: seen(j), complete: () => undefined },
            );
          }
        }
      }
      // Every subscription of B listening (each keyed on A's id or B's own, or over every id), then B's own event.
      await waitFor(
        () =>
          subscribers(gw, 'identification', theirs) >= 1 + 6 &&
          subscribers(gw, 'identification', own) >= 6 &&
          subscribers(gw, 'identification', null) >= 1 + 6,
        20_000,
        "B's subscriptions listening",
      );
      // A's third event arrives live, before B's own: each of B's streams must pass it by.
      await gw.gateway.sandbox.identification!.complete(theirs, { n: 'a3' });
      await gw.gateway.sandbox.identification!.complete(own, { n: 'b1' });
      for (const [i, values] of got.entries()) {
        const keyedOnTheirs = i % 9 < 3;
        if (keyedOnTheirs) continue;
        await waitFor(() => values.length > 0, 20_000, `B's own event on stream ${i}`);
        expect(values[0], `stream ${i}`).toMatchObject({
          data: { identificationCompleted: { id: own, payload: { n: 'b1' } } },
        });
      }
      // The streams keyed on A's id: still nothing once B's own event (after A's in the log) reached every other one.
      for (const [i, values] of got.entries()) if (i % 9 < 3) expect(values, `stream ${i}`).toEqual([]);
    } finally {
      await Promise.all(clients.map((c) => c.dispose()));
    }
  });
});

describe("MCP wait_for_events from now, while another app's events arrive", () => {
  const connect = mcpClientsPerTest();
  it('returns only the caller’s own event, not woken empty-handed by the other app’s', async () => {
    const theirs = (await ok(A, REGISTER, { input: { workflowId: 'wf-kyc', applicant: { lastName: 'P' } } }))
      .registerVerification.verification.externalId as string;
    const own = (await ok(B, REGISTER, { input: { workflowId: 'wf-kyc', applicant: { lastName: 'P' } } }))
      .registerVerification.verification.externalId as string;
    const other = await connect(gw, { key: B });
    const listening = subscribers(gw, 'verification', null);
    const waiting = other.call('wait_for_events', { timeoutSeconds: 120 });
    await waitFor(() => subscribers(gw, 'verification', null) > listening, 20_000, "B's wait listening");
    await gw.gateway.sandbox.verification!.complete(theirs);
    await deliveredEverywhere(gw);
    await gw.gateway.sandbox.verification!.complete(own);
    const events = (await waiting).structuredContent!.events as { uri: string }[];
    expect(events.map((e) => e.uri)).toEqual([`identity://verifications/${own}`]);
  });
});
