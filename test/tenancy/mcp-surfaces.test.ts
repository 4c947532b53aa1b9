// Tenancy on the MCP endpoint (docs/agents.md, "What an agent can never do"), for the kinds of personal data that
// test/server/mcp/mcp-events.test.ts does not already hold to it (mobile-ID results there): another app's
// verification, identification and provisioning read as unknown resources, a listen stream on them never fires, and
// wait_for_events resumed from a cursor taken before another app's events returns only the caller's own. Another
// app's plan: test/server/mcp/mcp-approval.test.ts and mcp-approvers.test.ts. GraphQL's transports:
// test/tenancy/every-surface.test.ts.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { mcpClientsPerTest, type TestMcpClient } from '../helpers/mcp.js';
import { deliveredEverywhere } from '../helpers/resumable.js';
import { waitFor } from '../helpers/wait.js';

const A = 'key-mcp-surface-a-0123456789';
const B = 'key-mcp-surface-b-9876543210';

const REGISTER = `mutation { registerVerification(input: { workflowId: "wf-kyc", applicant: { lastName: "Petrova" } }) {
  verification { externalId }
} }`;
const IDENTIFY = `mutation { createIdentification(input: { workflowId: "wf-mcp-surface" }) { identification { id } } }`;
const PROVISION = `mutation($input: ProvisionKafkaClusterInput!) {
  provisionKafkaCluster(input: $input) { provisioning { id } }
}`;

const uri = {
  verification: (id: string) => `identity://verifications/${id}`,
  identification: (id: string) => `identity://identifications/${id}`,
  provisioning: (id: string) => `cloud://provisionings/${id}`,
};

let gw: TestGateway;
const connect = mcpClientsPerTest();
beforeAll(async () => {
  gw = await startTestGateway({ GATEWAY_API_KEYS: `alpha:${A},beta:${B}`, SANDBOX_CALLBACK_DELAY_MS: '600000' });
});
afterAll(() => gw?.close());

async function created(key: string, query: string, variables: Record<string, unknown> = {}): Promise<string> {
  const res = await gw.graphql(query, variables, { key });
  expect(res.errors).toBeUndefined();
  const payload = Object.values(res.data!)[0] as Record<string, { id?: string; externalId?: string }>;
  const made = Object.values(payload)[0]!;
  return (made.externalId ?? made.id)!;
}
const verificationOf = (key: string) => created(key, REGISTER);
const identificationOf = (key: string) => created(key, IDENTIFY);
async function provisioningOf(key: string): Promise<string> {
  const input = {
    project: { name: 'mcp-surface' },
    network: { title: 'net' },
    subnet: { title: 'sub', cidr: '10.62.0.0/24' },
    cluster: { title: 'k', instanceType: 'C2_MEDIUM' },
  };
  const id = await created(key, PROVISION, { input });
  await gw.gateway.services.provisioning.idle();
  return id;
}
const completeVerification = (externalId: string) => gw.gateway.sandbox.verification!.complete(externalId);
const completeIdentification = (id: string) => gw.gateway.sandbox.identification!.complete(id);

/** What reading `at` answers `c`: the error a client gets, with the id it names left out. */
async function readError(c: TestMcpClient, at: string, id: string): Promise<{ code?: number; message: string }> {
  const error = await c.client.readResource({ uri: at }).then(
    () => null,
    (e: Error & { code?: number }) => e,
  );
  expect(error, `${at} was read`).toBeInstanceOf(Error);
  return { code: error!.code, message: error!.message.replaceAll(id, '<id>') };
}

describe("MCP: another app's personal data", () => {
  it("resources/read of another app's verification, identification and provisioning is an unknown one's not-found; resources/list is the same for both apps", async () => {
    const owned = {
      verification: await verificationOf(A),
      identification: await identificationOf(A),
      provisioning: await provisioningOf(A),
    };
    const owner = await connect(gw, { key: A });
    const other = await connect(gw, { key: B });
    for (const [kind, id] of Object.entries(owned) as [keyof typeof uri, string][]) {
      const read = await owner.client.readResource({ uri: uri[kind](id) });
      expect(read.contents[0]!.uri, kind).toBe(uri[kind](id));
      const unknownId = kind === 'verification' ? `customer-${randomUUID()}` : randomUUID();
      const theirs = await readError(other, uri[kind](id), id);
      expect(theirs.message, kind).toMatch(/not found/i);
      expect(theirs, kind).toEqual(await readError(other, uri[kind](unknownId), unknownId));
    }
    expect((await other.client.listResources()).resources).toEqual((await owner.client.listResources()).resources);
    expect((await other.client.listResourceTemplates()).resourceTemplates).toEqual(
      (await owner.client.listResourceTemplates()).resourceTemplates,
    );
  });

  it("a subscriptions/listen stream on another app's verification and identification never fires", async () => {
    const theirs = { verification: await verificationOf(A), identification: await identificationOf(A) };
    const own = await verificationOf(B);
    const owner = await connect(gw, { key: A });
    const other = await connect(gw, { key: B });
    const seen: { owner: string[]; other: string[] } = { owner: [], other: [] };
    owner.client.setNotificationHandler('notifications/resources/updated', (n) => void seen.owner.push(n.params.uri));
    other.client.setNotificationHandler('notifications/resources/updated', (n) => void seen.other.push(n.params.uri));
    const theirUris = [uri.verification(theirs.verification), uri.identification(theirs.identification)];
    const ownerSub = await owner.client.listen({ resourceSubscriptions: theirUris });
    const otherSub = await other.client.listen({ resourceSubscriptions: [...theirUris, uri.verification(own)] });

    await completeVerification(theirs.verification);
    await completeIdentification(theirs.identification);
    await waitFor(() => seen.owner.length === 2, 20_000, "the owner's notifications");
    // B's own event comes after A's on the one stream: once it is there, A's were handled and never came.
    await completeVerification(own);
    await waitFor(() => seen.other.length > 0, 20_000, "B's own notification");
    expect(seen.owner.sort()).toEqual([...theirUris].sort());
    expect(seen.other).toEqual([uri.verification(own)]);
    await ownerSub.close();
    await otherSub.close();
  });

  it('wait_for_events resumed from a cursor taken before another app’s events returns only its own', async () => {
    const theirs = { verification: await verificationOf(A), identification: await identificationOf(A) };
    const own = await verificationOf(B);
    const owner = await connect(gw, { key: A });
    const other = await connect(gw, { key: B });
    const start = await other.call('wait_for_events', { timeoutSeconds: 0 });
    const cursor = start.structuredContent!.cursor as string;

    await completeVerification(theirs.verification);
    await completeIdentification(theirs.identification);
    await completeVerification(own);
    await deliveredEverywhere(gw);

    const keys = async (c: TestMcpClient) =>
      ((await c.call('wait_for_events', { cursor, timeoutSeconds: 0 })).structuredContent!.events as { uri: string }[])
        .map((e) => e.uri)
        .sort();
    expect(await keys(other)).toEqual([uri.verification(own)]);
    expect(await keys(owner)).toEqual(
      [uri.verification(theirs.verification), uri.identification(theirs.identification)].sort(),
    );
  });
});
