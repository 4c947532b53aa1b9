// MCP is stateless (docs/decisions/060): on two replicas sharing one embedded PostgreSQL, an agent plans on one,
// executes with its person's approval on the other, and a retry on the first replays the outcome; an approved plan
// both replicas are asked to run at once, and a plan a stopped replica left executing, are run by one of them only.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { PLAN_RETENTION_MS } from '../../../src/store/agent-plans.js';
import { mcpClient } from '../../helpers/mcp.js';
import { startReplicas, type Replicas } from '../../helpers/postgres.js';

let replicas: Replicas;

/** The creations both replicas' cloud sandboxes received (the token exchange's POSTs left out). */
const creations = () =>
  [replicas.a, replicas.b].flatMap((g) =>
    g.gateway.sandbox.cloud!.requests.filter((r) => r.method === 'POST' && !r.path.startsWith('/iam')),
  ).length;
beforeAll(async () => {
  replicas = await startReplicas('mcp_replicas', {
    GATEWAY_API_KEYS: 'agent:k1',
    MCP_MUTATIONS: 'approve',
    MCP_APPROVAL: 'elicitation',
  });
}, 180_000);
afterAll(async () => {
  await replicas?.close();
});

describe('MCP across replicas (PostgreSQL)', () => {
  it('a plan made on one replica is approved and executed on the other, and replayed on the first', async () => {
    const onA = await mcpClient(replicas.a, { key: 'k1', person: 'accept' });
    const onB = await mcpClient(replicas.b, { key: 'k1', person: 'accept' });
    try {
      const planned = await onA.call('create_project', { input: { name: 'across' } });
      const planId = planned.structuredContent!.planId as string;
      const executed = await onB.call('execute_plan', { planId });
      expect(executed.structuredContent).toMatchObject({ planId, status: 'SUCCEEDED', replayed: false });
      expect(onB.asked).toHaveLength(1);
      const again = await onA.call('execute_plan', { planId });
      expect(again.structuredContent).toMatchObject({ planId, status: 'SUCCEEDED', replayed: true });
      expect(onA.asked).toEqual([]);
      expect(creations()).toBe(1);
    } finally {
      await onA.close();
      await onB.close();
    }
  });

  it('a plan approved once, executed on both replicas at the same moment, runs once; a third call replays', async () => {
    const onA = await mcpClient(replicas.a, { key: 'k1', person: 'accept' });
    const onB = await mcpClient(replicas.b, { key: 'k1', person: 'accept' });
    try {
      const planned = await onA.call('create_project', { input: { name: 'approved once' } });
      const planId = planned.structuredContent!.planId as string;
      const approved = await replicas.b.gateway.services.agentPlans.approve(
        planId,
        { owner: 'person', name: 'a person' },
        'elicitation',
      );
      expect(approved.ok).toBe(true);
      const before = creations();
      const both = await Promise.all([onA.call('execute_plan', { planId }), onB.call('execute_plan', { planId })]);
      const ran = both.filter((r) => r.structuredContent?.status === 'SUCCEEDED' && !r.structuredContent.replayed);
      expect(ran, JSON.stringify(both.map((r) => r.structuredContent))).toHaveLength(1);
      // Approved already: neither replica asked the person again.
      expect([...onA.asked, ...onB.asked]).toEqual([]);
      const third = await onA.call('execute_plan', { planId });
      expect(third.structuredContent).toMatchObject({ planId, status: 'SUCCEEDED', replayed: true });
      expect(creations()).toBe(before + 1);
    } finally {
      await onA.close();
      await onB.close();
    }
  });

  it('a plan left executing by a replica that stopped is run again by one replica of two, once', async () => {
    const onA = await mcpClient(replicas.a, { key: 'k1', person: 'accept' });
    const onB = await mcpClient(replicas.b, { key: 'k1', person: 'accept' });
    try {
      const { agentPlans, config, store } = replicas.a.gateway.services;
      /** An approved plan a replica claimed and then stopped running: untouched for IDEMPOTENCY_TAKEOVER. */
      const lostPlan = async (name: string) => {
        const planId = (await onA.call('create_project', { input: { name } })).structuredContent!.planId as string;
        expect((await agentPlans.approve(planId, { owner: 'person', name: 'a person' }, 'elicitation')).ok).toBe(true);
        await store.db
          .updateTable('agent_plans')
          .set({ status: 'executing', updated_at: Date.now() - config.idempotencyTakeoverMs - 1 })
          .where('id', '=', planId)
          .execute();
        return planId;
      };
      const before = creations();
      const raced = await lostPlan('raced');
      const results = await Promise.all([
        onA.call('execute_plan', { planId: raced }),
        onB.call('execute_plan', { planId: raced }),
      ]);
      const ran = results.filter((r) => r.structuredContent?.status === 'SUCCEEDED' && !r.structuredContent.replayed);
      expect(ran, JSON.stringify(results.map((r) => r.structuredContent))).toHaveLength(1);
      expect(creations()).toBe(before + 1);

      // The claim itself: a lost plan is claimed only once approved again; then, of two replicas' claims at once,
      // exactly one is true.
      const twice = await lostPlan('claimed twice');
      const [onAPlans, onBPlans] = [agentPlans, replicas.b.gateway.services.agentPlans];
      expect(await onAPlans.claim((await onAPlans.get(twice))!)).toBeNull();
      const again = await onAPlans.approve(twice, { owner: 'person', name: 'a person' }, 'elicitation', 'UNKNOWN');
      expect(again.ok).toBe(true);
      const [seenByA, seenByB] = await Promise.all([onAPlans.get(twice), onBPlans.get(twice)]);
      expect([seenByA!.status, seenByB!.status]).toEqual(['unknown', 'unknown']);
      const claims = await Promise.all([onAPlans.claim(seenByA!), onBPlans.claim(seenByB!)]);
      expect(claims.map(Boolean).sort()).toEqual([false, true]);
    } finally {
      await onA.close();
      await onB.close();
    }
  });

  it('on PostgreSQL too: plans are counted by state, and purged with their audit rows after their retention', async () => {
    const onA = await mcpClient(replicas.a, { key: 'k1' });
    try {
      const planned = await onA.call('create_project', { input: { name: 'counted' } });
      const planId = planned.structuredContent!.planId as string;
      const plans = replicas.b.gateway.services.agentPlans;
      const counts = await plans.countByState();
      expect(counts.get('pending')).toBeGreaterThanOrEqual(1);
      expect(await plans.purgeExpired(Date.now())).toBe(0);
      const plan = (await plans.get(planId))!;
      expect(await plans.purgeExpired(plan.expiresAt! + PLAN_RETENTION_MS + 1)).toBeGreaterThanOrEqual(1);
      expect(await plans.get(planId)).toBeUndefined();
      expect(await plans.auditTrail({ planId, first: 10 })).toEqual([]);
    } finally {
      await onA.close();
    }
  });
});
