// Resumable streams and tenancy (docs/subscriptions.md, cursors): a cursor is a position in the one event log, not a
// pass to what it was handed out with. Another app resuming from it, on the same auth_req_id or provisioning, gets
// exactly what it gets from any cursor for an id with nothing of its own: no event of the owner's, the same NOT_FOUND.
import { randomUUID } from 'node:crypto';
import type { Client } from 'graphql-ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { wsClient } from '../helpers/mobile-id.js';
import { operationOver } from '../helpers/operation.js';
import { cursorNow, deliveredEverywhere } from '../helpers/resumable.js';
import { waitFor } from '../helpers/wait.js';

const A = 'key-resume-app-a-0123456789';
const B = 'key-resume-app-b-9876543210';

const COMPLETE = `mutation($id: String!, $outcome: SandboxMobileIdOutcome!) {
  sandboxCompleteMobileIdAuthentication(authReqId: $id, outcome: $outcome) { accepted }
}`;
const WATCH = `subscription($id: String!, $after: String) {
  mobileIdAuthentication(authReqId: $id, after: $after) {
    __typename
    ... on MobileIdAuthenticationFailed { reason }
  }
}`;
const PROVISION = `mutation($input: ProvisionKafkaClusterInput!) {
  provisionKafkaCluster(input: $input) { provisioning { id } }
}`;
const PROGRESS = `subscription($id: ID!, $after: String) { provisioningProgress(id: $id, after: $after) { id state } }`;

/** Every value a subscription received (data and errors), as the client got it. */
function collect(client: Client, query: string, variables: Record<string, unknown>): unknown[] {
  const got: unknown[] = [];
  client.subscribe(
    { query, variables },
    { next: (v) => void got.push(v), error: (e) => void got.push({ error: e }), complete: () => undefined },
  );
  return got;
}

describe('another app resuming from a cursor', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway({ GATEWAY_API_KEYS: `${A},${B}` });
  });
  afterAll(() => gw?.close());

  it("mobileIdAuthentication(authReqId, after) replays none of the owner's result, from a cursor before or after it; its own comes", async () => {
    const authReqId = `auth-${randomUUID()}`;
    const before = cursorNow(gw);
    const done = await gw.graphql(COMPLETE, { id: authReqId, outcome: 'SUCCESS' }, { key: A });
    expect(done.errors).toBeUndefined();
    await deliveredEverywhere(gw);
    const afterA = cursorNow(gw);
    const client = wsClient(gw, { key: B });
    try {
      const streams = [before, afterA, undefined].map((after) =>
        collect(client, WATCH, { id: authReqId, ...(after ? { after } : {}) }),
      );
      await waitFor(
        () => gw.gateway.services.events.bus.subscribers('mobile-id') >= 3,
        20_000,
        "B's subscriptions listening",
      );
      const own = await gw.graphql(COMPLETE, { id: authReqId, outcome: 'CANCELLED_BY_USER' }, { key: B });
      expect(own.errors).toBeUndefined();
      for (const got of streams) {
        await waitFor(() => got.length > 0, 20_000, "B's own result");
        expect(got[0]).toMatchObject({
          data: { mobileIdAuthentication: { __typename: 'MobileIdAuthenticationFailed', reason: 'CANCELLED_BY_USER' } },
        });
      }
    } finally {
      await client.dispose();
    }
  });

  it("provisioningProgress(id, after) of the owner's provisioning is an unknown id's NOT_FOUND, with its cursor too", async () => {
    const input = {
      project: { name: 'resume' },
      network: { title: 'net' },
      subnet: { title: 'sub', cidr: '10.62.0.0/24' },
      cluster: { title: 'k', instanceType: 'C2_MEDIUM' },
    };
    const before = cursorNow(gw);
    const res = await gw.graphql(PROVISION, { input }, { key: A });
    expect(res.errors).toBeUndefined();
    const id = res.data!.provisionKafkaCluster.provisioning.id as string;
    await gw.gateway.services.provisioning.idle();
    await deliveredEverywhere(gw);
    const afterA = cursorNow(gw);
    const unknownId = randomUUID();
    for (const after of [before, afterA]) {
      for (const transport of ['ws', 'sse'] as const) {
        const theirs = await operationOver(transport, gw, B, { query: PROGRESS, variables: { id, after } });
        const unknown = await operationOver(transport, gw, B, { query: PROGRESS, variables: { id: unknownId, after } });
        expect(theirs.raw).toContain('NOT_FOUND');
        expect(theirs.raw.replaceAll(id, '<id>')).toBe(unknown.raw.replaceAll(unknownId, '<id>'));
      }
    }
    const own = await operationOver('ws', gw, A, { query: PROGRESS, variables: { id, after: before } });
    expect(own.data).toMatchObject({ provisioningProgress: { id } });
  });
});
