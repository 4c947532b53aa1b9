// Tenancy on PostgreSQL, across replicas (docs/architecture.md, "Tenancy"): what one app created on replica A that
// holds personal data (a verification and its results, an identification, a mobile-ID result, a provisioning, an
// agent's plan) reads, for another app on replica B, exactly as an id that does not exist, while its owner reads it on
// B. The owner rule is applied in SQL for some of these reads (src/auth/tenancy.ts), so it is held on both dialects:
// the same reads on SQLite are test/tenancy/every-surface.test.ts and mcp-surfaces.test.ts.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { mcpClientsPerTest } from '../helpers/mcp.js';
import { operationOver } from '../helpers/operation.js';
import { startReplicas, type Replicas } from '../helpers/postgres.js';
import { createdBy, NOTHING, READ } from '../helpers/tenancy.js';

const A = 'key-pg-tenant-a-0123456789';
const B = 'key-pg-tenant-b-9876543210';

let replicas: Replicas;
let owned: Record<string, unknown>;
const connect = mcpClientsPerTest();

beforeAll(async () => {
  replicas = await startReplicas('tenancy_replicas', {
    GATEWAY_API_KEYS: `alpha:${A},beta:${B}`,
    SANDBOX_CALLBACK_DELAY_MS: '600000',
    MCP_MUTATIONS: 'approve',
  });
  owned = await createdBy(replicas.a, A, { workflowId: 'wf-pg-tenant', project: 'pg-tenant', cidr: '10.66.0.0/24' });
}, 180_000);
afterAll(() => replicas?.close());

describe("another app's personal data on PostgreSQL, across replicas", () => {
  it('the owner reads each kind on either replica', async () => {
    for (const gw of [replicas.a, replicas.b]) {
      const mine = await operationOver('post', gw, A, { query: READ, variables: owned });
      expect(mine.errors, mine.raw).toBeUndefined();
      const data = mine.data as Record<string, unknown>;
      // Verification results are read from the verification upstream, and each replica here has a sandbox of its own:
      // only A's knows the verification (in a deployment the replicas share one upstream).
      const fromStore = gw === replicas.a ? data : { ...data, verificationResults: [] };
      expect(Object.values(fromStore).flat(), mine.raw).not.toContain(null);
    }
  });

  it.each(['post', 'ws', 'sse'] as const)(
    'over %s on either replica: null for each kind, the answer of an unknown id byte for byte',
    async (transport) => {
      for (const gw of [replicas.a, replicas.b]) {
        const id = randomUUID();
        const unknownIds = { v: [`customer-${id}`], vid: randomUUID(), i: id, m: `auth-${id}`, p: randomUUID() };
        const theirs = await operationOver(transport, gw, B, { query: READ, variables: owned });
        const unknown = await operationOver(transport, gw, B, { query: READ, variables: unknownIds });
        expect(theirs.data).toEqual(NOTHING);
        expect(theirs.raw).toBe(unknown.raw);
      }
    },
  );

  it("an agent's plan made on A: another app's agent on B gets an unknown plan's answer, the owner's runs it", async () => {
    const owner = await connect(replicas.a, { key: A });
    const planned = await owner.call('create_project', { input: { name: 'pg-tenant-plan' } });
    const planId = planned.structuredContent!.planId as string;
    expect(planId, JSON.stringify(planned)).toMatch(/^[0-9a-f-]{36}$/);
    const other = await connect(replicas.b, { key: B });
    const unknownId = randomUUID();
    const theirs = await other.call('execute_plan', { planId });
    const unknown = await other.call('execute_plan', { planId: unknownId });
    expect(theirs.isError).toBe(true);
    expect(JSON.stringify(theirs).replaceAll(planId, '<id>')).toBe(
      JSON.stringify(unknown).replaceAll(unknownId, '<id>'),
    );
    // The owner, on B, is told its plan waits for an approval: it exists for it alone.
    const ownerOnB = await connect(replicas.b, { key: A });
    const mine = await ownerOnB.call('execute_plan', { planId });
    expect(mine.structuredContent).toMatchObject({ code: 'APPROVAL_REQUIRED' });
  });
});
