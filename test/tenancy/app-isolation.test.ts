import { randomUUID } from 'node:crypto';
import type { Client } from 'graphql-ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { VerificationSandbox } from '../../src/sandbox/verification.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { subscribe } from '../helpers/identity.js';
import { QUERY as MOBILE_ID_QUERY, SUBSCRIPTION as MOBILE_ID_SUBSCRIPTION, wsClient } from '../helpers/mobile-id.js';
import { waitFor } from '../helpers/wait.js';

/**
 * Two apps, one API key each, on one gateway (docs/decisions/010, 043): what one app created that holds personal data
 * reads, for the other, exactly like an id that does not exist. Everything goes over real HTTP and
 * WebSocket against the sandbox.
 */
const A = 'key-app-a';
const B = 'key-app-b';

const REGISTER = `mutation($input: RegisterVerificationInput!) { registerVerification(input: $input) { verification { externalId } } }`;
const RESULTS = `query($ids: [ID!]!) { verificationResults(externalIds: $ids) { externalId status data } }`;
const NODE = `query($id: ID!) {
  node(id: $id) { id ... on Verification { externalId status result { status } completion { status } } ... on Identification { url } }
}`;
const COMPLETED = `subscription($id: ID) { verificationCompleted(externalId: $id) { externalId status payload } }`;
const IDENTIFY = `mutation { createIdentification(input: { workflowId: "wf-ident" }) { identification { id url } } }`;
const IDENTIFICATION = `query($id: ID!) { identification(id: $id) { id url idShort } }`;
const PROVISION = `mutation($input: ProvisionKafkaClusterInput!) {
  provisionKafkaCluster(input: $input) { provisioning { id state } }
}`;
const PROVISIONING = `query($id: ID!) { provisioning(id: $id) { id state project { id } } }`;
const PROGRESS = `subscription($id: ID!) { provisioningProgress(id: $id) { id state } }`;
const COMPLETE_MOBILE_ID = `mutation($id: String!) { sandboxCompleteMobileIdAuthentication(authReqId: $id) { accepted httpStatus } }`;

/** Resolves once the server has handled the socket's earlier messages (graphql-ws handles them in order). */
async function settled(client: Client): Promise<void> {
  const tick = subscribe(client, 'subscription { heartbeat(intervalMs: 10, count: 1) }');
  await waitFor(() => tick.completed, 20_000, 'heartbeat');
}

describe('several apps on one gateway: each reads only what its own API key created', () => {
  let t: TestGateway;
  let sandbox: VerificationSandbox;
  const clients: Client[] = [];
  const client = (key: string) => {
    const c = wsClient(t, { key });
    clients.push(c);
    return c;
  };
  const register = async (key: string) => {
    const res = await t.graphql(
      REGISTER,
      { input: { workflowId: 'wf-kyc', applicant: { lastName: 'Petrova' } } },
      { key },
    );
    expect(res.errors).toBeUndefined();
    return res.data!.registerVerification.verification.externalId as string;
  };
  const resultCalls = () => sandbox.requests.filter((r) => r.path === '/api/v2/verifications/results');

  beforeAll(async () => {
    t = await startTestGateway({ GATEWAY_API_KEYS: `${A},${B}`, SANDBOX_CALLBACK_DELAY_MS: '600000' });
    sandbox = t.gateway.sandbox.verification!;
  });
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.dispose()));
    await t.close();
  });

  it("another key's verification results are null, as for an unknown id, and never asked of the upstream", async () => {
    const id = await register(A);
    await sandbox.complete(id);
    sandbox.clearRequests();

    const mine = await t.graphql(RESULTS, { ids: [id] }, { key: A });
    expect(mine.errors).toBeUndefined();
    expect(mine.data!.verificationResults).toEqual([
      { externalId: id, status: 'COMPLETED', data: expect.objectContaining({ decision: 'APPROVED' }) },
    ]);
    expect(resultCalls()).toHaveLength(1);

    sandbox.clearRequests();
    const theirs = await t.graphql(RESULTS, { ids: [id, `unknown-${randomUUID()}`] }, { key: B });
    expect(theirs).toEqual({ status: 200, data: { verificationResults: [null, null] } });
    expect(resultCalls()).toHaveLength(0);
  });

  it("another key's verification, its result and its callback event read as null through node(id)", async () => {
    const id = await register(A);
    await sandbox.complete(id);
    const mine = await t.graphql(NODE, { id }, { key: A });
    expect(mine.data!.node).toMatchObject({ externalId: id, result: { status: 'COMPLETED' } });
    await waitFor(
      async () => (await t.graphql(NODE, { id }, { key: A })).data!.node.completion !== null,
      20_000,
      'the stored callback',
    );

    const theirs = await t.graphql(NODE, { id }, { key: B });
    const unknown = await t.graphql(NODE, { id: `unknown-${randomUUID()}` }, { key: B });
    expect(theirs).toEqual({ status: 200, data: { node: null } });
    expect(unknown).toEqual(theirs);
  });

  it('a subscriber with another key gets no event of a verification, stored or live, while its owner gets both', async () => {
    const stored = await register(A);
    await sandbox.complete(stored);
    const live = await register(A);
    const own = await register(B);

    const a = client(A);
    const b = client(B);
    const aLive = subscribe(a, COMPLETED, { id: live });
    const bStored = subscribe(b, COMPLETED, { id: stored });
    const bLive = subscribe(b, COMPLETED, { id: live });
    const bOwn = subscribe(b, COMPLETED, { id: own });
    await settled(a);
    await settled(b);

    await sandbox.complete(live);
    await waitFor(() => aLive.received.length === 1, 20_000, "the owner's event");
    // B's own verification completes after A's: once B sees it, B's socket has been sent everything before it.
    await sandbox.complete(own);
    await waitFor(() => bOwn.received.length === 1, 20_000, "B's own event");
    await settled(b);

    expect(aLive.received[0].verificationCompleted).toMatchObject({ externalId: live, status: 'COMPLETED' });
    expect(bStored.received).toEqual([]);
    expect(bLive.received).toEqual([]);
    expect([...bStored.errors, ...bLive.errors]).toEqual([]);
    expect(bOwn.received[0].verificationCompleted.externalId).toBe(own);
    // A late subscriber with B's key: the log holds A's event, B still gets nothing.
    const late = subscribe(b, COMPLETED, { id: live });
    await settled(b);
    expect(late.received).toEqual([]);
    for (const s of [aLive, bStored, bLive, bOwn, late]) s.stop();
  });

  it("another key's identification reads as null through identification(id) and node(id)", async () => {
    const created = await t.graphql(IDENTIFY, {}, { key: A });
    expect(created.errors).toBeUndefined();
    const id = created.data!.createIdentification.identification.id as string;

    expect((await t.graphql(IDENTIFICATION, { id }, { key: A })).data!.identification).toMatchObject({ id });
    const theirs = await t.graphql(IDENTIFICATION, { id }, { key: B });
    const unknown = await t.graphql(IDENTIFICATION, { id: randomUUID() }, { key: B });
    expect(theirs).toEqual({ status: 200, data: { identification: null } });
    expect(unknown).toEqual(theirs);
    expect((await t.graphql(NODE, { id }, { key: B })).data!.node).toBeNull();
  });

  it('a mobile-ID result received on a token one key issued is null for another key, and its subscription gets no event', async () => {
    const authReqId = `auth-${randomUUID()}`;
    const b = client(B);
    const bLive = subscribe(b, MOBILE_ID_SUBSCRIPTION, { id: authReqId });
    await settled(b);

    const done = await t.graphql(COMPLETE_MOBILE_ID, { id: authReqId }, { key: A });
    expect(done.data!.sandboxCompleteMobileIdAuthentication).toMatchObject({ accepted: true, httpStatus: 204 });
    const mine = await t.graphql(MOBILE_ID_QUERY, { id: authReqId }, { key: A });
    expect(mine.data!.mobileIdAuthentication).toMatchObject({ __typename: 'MobileIdAuthenticated', authReqId });

    const theirs = await t.graphql(MOBILE_ID_QUERY, { id: authReqId }, { key: B });
    const unknown = await t.graphql(MOBILE_ID_QUERY, { id: `auth-${randomUUID()}` }, { key: B });
    expect(theirs).toEqual({ status: 200, data: { mobileIdAuthentication: null } });
    expect(unknown).toEqual(theirs);

    // The owner's subscription gets the stored result; B's, live or late, gets nothing and no error.
    const a = client(A);
    const aLate = subscribe(a, MOBILE_ID_SUBSCRIPTION, { id: authReqId });
    await waitFor(() => aLate.received.length === 1, 20_000, "the owner's result");
    const bLate = subscribe(b, MOBILE_ID_SUBSCRIPTION, { id: authReqId });
    await settled(b);
    expect(bLive.received).toEqual([]);
    expect(bLate.received).toEqual([]);
    expect([...bLive.errors, ...bLate.errors]).toEqual([]);
    expect(bLive.completed || bLate.completed).toBe(false);
    for (const s of [bLive, bLate, aLate]) s.stop();
  });

  it("another key's provisioning is null, its progress is NOT_FOUND with the text of an unknown id, and the cloud ledger stays shared", async () => {
    const started = await t.graphql(
      PROVISION,
      {
        input: {
          project: { name: 'tenant-a' },
          network: { title: 'net' },
          subnet: { title: 'sub', cidr: '10.60.0.0/24' },
          cluster: { title: 'k', instanceType: 'C2_MEDIUM' },
        },
      },
      { key: A },
    );
    expect(started.errors).toBeUndefined();
    const id = started.data!.provisionKafkaCluster.provisioning.id as string;
    await t.gateway.services.provisioning.idle();
    const mine = await t.graphql(PROVISIONING, { id }, { key: A });
    expect(mine.data!.provisioning).toMatchObject({ id, state: 'SUCCEEDED' });

    const theirs = await t.graphql(PROVISIONING, { id }, { key: B });
    expect(theirs).toEqual({ status: 200, data: { provisioning: null } });

    const b = client(B);
    const progress = async (pid: string) => {
      const sub = subscribe(b, PROGRESS, { id: pid });
      await waitFor(() => sub.errors.length > 0 || sub.completed, 20_000, 'the end of the subscription');
      return sub;
    };
    const theirProgress = await progress(id);
    const unknownId = randomUUID();
    const unknownProgress = await progress(unknownId);
    expect(theirProgress.received).toEqual([]);
    const text = (s: { errors: unknown[] }, pid: string) => JSON.stringify(s.errors).replaceAll(pid, '<id>');
    expect(text(theirProgress, id)).toContain('NOT_FOUND');
    expect(text(theirProgress, id)).toBe(text(unknownProgress, unknownId));

    // The cloud resources live in one cloud account: every key of the gateway reads them.
    const projectId = mine.data!.provisioning.project.id as string;
    const project = await t.graphql(`query($id: ID!) { project(id: $id) { id name } }`, { id: projectId }, { key: B });
    expect(project.data!.project).toEqual({ id: projectId, name: 'tenant-a' });
  });
});
