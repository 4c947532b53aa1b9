// No oracles across apps: what one app registered or created can neither be detected nor taken by another app
// with its own valid key. Two API keys over real HTTP and WebSocket against the sandbox upstreams.
import { createHash, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { upstreamExternalId } from '../../src/identity/service.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { collect, wsClient } from '../helpers/mobile-id.js';
import { subscribers, waitFor } from '../helpers/wait.js';

const A = 'key-oracle-app-a-0123456789';
const B = 'key-oracle-app-b-9876543210';

const REGISTER = `mutation($input: RegisterVerificationInput!) { registerVerification(input: $input) { verification { id externalId } } }`;
const RESULTS = `query($ids: [ID!]!) { verificationResults(externalIds: $ids) { externalId status verification { id externalId } } }`;
const COMPLETED = `subscription($id: ID) { verificationCompleted(externalId: $id) { externalId status payload verification { externalId } } }`;
const IDENTIFY = `mutation { createIdentification(input: { workflowId: "wf-oracle" }) { identification { id } } }`;
const PLAN = `query($input: ProvisionKafkaClusterInput!) {
  planKafkaCluster(input: $input) { valid errors { field message } steps { name action resourceId errors { field code message } } }
}`;
const PROVISION = `mutation($input: ProvisionKafkaClusterInput!) { provisionKafkaCluster(input: $input) { provisioning { id } } }`;

const kafka = (ipAddressId: string) => ({
  project: { name: 'oracle' },
  network: { title: 'net' },
  subnet: { title: 'sub', cidr: '10.90.0.0/24' },
  ipAddressId,
  cluster: { title: 'kafka', instanceType: 'C2_MEDIUM' },
  topics: [{ name: 'orders', partitions: 1, replicationFactor: 1 }],
  users: [{ name: 'svc', password: 'Oracle-secret-1' }],
});

describe('no oracles across apps', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({ GATEWAY_API_KEYS: `${A},${B}`, SANDBOX_CALLBACK_DELAY_MS: '600000' });
  });
  afterAll(() => t.close());

  const register = (key: string, externalId?: string, lastName = 'Ivanova') =>
    t.graphql(
      REGISTER,
      { input: { workflowId: 'wf-kyc', applicant: { lastName }, ...(externalId ? { externalId } : {}) } },
      { key },
    );

  it("planKafkaCluster and provisionKafkaCluster answer another app's verification or identification id word for word as an unknown id", async () => {
    const verification = (await register(A)).data!.registerVerification.verification.id as string;
    const identification = (await t.graphql(IDENTIFY, {}, { key: A })).data!.createIdentification.identification
      .id as string;
    const unknown = randomUUID();
    const answer = async (query: string, id: string) =>
      JSON.stringify(await t.graphql(query, { input: kafka(id) }, { key: B })).replaceAll(id, '<id>');

    const planOfUnknown = await answer(PLAN, unknown);
    expect(planOfUnknown).toContain('not in the');
    expect(await answer(PLAN, verification)).toBe(planOfUnknown);
    expect(await answer(PLAN, identification)).toBe(planOfUnknown);

    const provisionOfUnknown = await answer(PROVISION, unknown);
    expect(provisionOfUnknown).toContain('BAD_USER_INPUT');
    expect(await answer(PROVISION, verification)).toBe(provisionOfUnknown);
    expect(await answer(PROVISION, identification)).toBe(provisionOfUnknown);
  });

  it("an app's verification external id can neither be detected nor taken by another app: both register it, each reads and receives only its own", async () => {
    const externalId = `customer-${randomUUID()}`;
    const free = `customer-${randomUUID()}`;
    // B registers A's id first, then A registers it: both succeed, exactly as for an id nobody uses.
    const bFirst = await register(B, externalId, 'Decline-me');
    const aSecond = await register(A, externalId);
    const bFree = await register(B, free);
    for (const res of [bFirst, aSecond, bFree]) expect(res.errors).toBeUndefined();
    const aId = aSecond.data!.registerVerification.verification.id as string;
    const bId = bFirst.data!.registerVerification.verification.id as string;
    expect(aSecond.data!.registerVerification.verification.externalId).toBe(externalId);
    expect(bFirst.data!.registerVerification.verification.externalId).toBe(externalId);

    // Upstream, they are two verifications, under ids derived from each app's scope.
    const sandbox = t.gateway.sandbox.verification!;
    expect(aId).toBe(upstreamExternalId(scopeOfBareKey(A), externalId));
    expect(bId).toBe(upstreamExternalId(scopeOfBareKey(B), externalId));
    expect(sandbox.verifications().map((v) => v.externalId)).toEqual(expect.arrayContaining([aId, bId]));
    expect(sandbox.verifications().map((v) => v.externalId)).not.toContain(externalId);

    // Each app waits for the id; the upstream completes both; each app receives its own callback only.
    const aWs = wsClient(t, { key: A });
    const bWs = wsClient(t, { key: B });
    try {
      const aEvents = collect(aWs, COMPLETED, { id: externalId });
      const bEvents = collect(bWs, COMPLETED, { id: externalId });
      await waitFor(() => subscribers(t, 'verification', externalId) === 2);
      await sandbox.complete(aId);
      await waitFor(() => aEvents.results.length === 1);
      await sandbox.complete(bId);
      await waitFor(() => bEvents.results.length === 1);
      expect(aEvents.results[0].data.verificationCompleted).toMatchObject({
        externalId,
        payload: { decision: 'APPROVED' },
        verification: { externalId },
      });
      expect(bEvents.results[0].data.verificationCompleted).toMatchObject({
        externalId,
        payload: { decision: 'DECLINED' },
        verification: { externalId },
      });
      expect(aEvents.results).toHaveLength(1);
    } finally {
      await Promise.all([aWs.dispose(), bWs.dispose()]);
    }

    const aResults = (await t.graphql(RESULTS, { ids: [externalId] }, { key: A })).data!.verificationResults;
    const bResults = (await t.graphql(RESULTS, { ids: [externalId] }, { key: B })).data!.verificationResults;
    expect(aResults[0]).toMatchObject({ externalId, verification: { id: aId } });
    expect(bResults[0]).toMatchObject({ externalId, verification: { id: bId } });
  });
});

/** The owner scope of a bare key, as src/auth/caller.ts derives it. */
function scopeOfBareKey(key: string): string {
  return `key:${createHash('sha256').update(key).digest('hex').slice(0, 16)}`;
}
