// A composite provisioning's plan (docs/agents.md, What a plan binds): once approved, the upstream receives exactly the
// creations its steps show, in their order and nothing more: each body as shown, a placeholder (`{{project.id}}`)
// standing for the id an earlier step created and `***` for a password, and the summary a person reads has one line per
// creation.
import { describe, expect, it } from 'vitest';

import { appsFile, gatewaysPerTest } from '../../helpers/gateway.js';
import { mcpClientsPerTest, textOf } from '../../helpers/mcp.js';

const start = gatewaysPerTest();
const connect = mcpClientsPerTest();

const AGENT_KEY = 'agent-key-0123456789';
const APPROVER_KEY = 'approver-key-0123456789';
const APPROVE = 'mutation($id: ID!) { approvePlan(planId: $id) { status } }';

const INPUTS: Record<string, unknown> = {
  provision_kafka_cluster: {
    project: { name: 'kp' },
    network: { title: 'kn' },
    subnet: { title: 'ks', cidr: '10.1.0.0/24' },
    cluster: { title: 'k', instanceCount: 3, instanceType: 'C1_MEDIUM' },
    topics: [{ name: 'orders', partitions: 3, replicationFactor: 2 }, { name: 'audit' }],
    users: [{ name: 'app', password: 'Sup3r-secret-pw1' }],
  },
  provision_virtual_machine: {
    project: { name: 'vm-p' },
    network: { title: 'vm-n' },
    subnet: { title: 'vm-s', cidr: '10.2.0.0/24' },
    ipAddress: { title: 'vm-ip' },
    virtualMachine: {
      title: 'vm',
      platform: 'COMPUTE_V2',
      instanceType: 'C1_SMALL',
      bootDisk: { sizeGb: 20, diskType: 'SSD_BASIC', image: 'DEBIAN_11' },
      users: [{ name: 'ops', password: 'Sup3r-secret-pw2' }],
    },
  },
};

interface Step {
  action: string;
  request: { path: string; body: unknown } | null;
}

/** Where `sent` differs from `shown`: a placeholder matches any id, `***` any secret; anything else exactly. */
function differences(shown: unknown, sent: unknown, path: string, out: string[]): void {
  if (typeof shown === 'string' && (/^\{\{[\w.:-]+\}\}$/.test(shown) || shown === '***')) {
    if (typeof sent !== 'string' || sent === '') out.push(`${path}: ${JSON.stringify(sent)}`);
    return;
  }
  if (shown && typeof shown === 'object' && sent && typeof sent === 'object') {
    const keys = new Set([...Object.keys(shown), ...Object.keys(sent)]);
    for (const k of keys)
      differences((shown as Record<string, unknown>)[k], (sent as Record<string, unknown>)[k], `${path}.${k}`, out);
    return;
  }
  if (JSON.stringify(shown) !== JSON.stringify(sent))
    out.push(`${path}: shown ${JSON.stringify(shown)}, sent ${JSON.stringify(sent)}`);
}

describe('a composite plan sends what it shows', () => {
  for (const [tool, input] of Object.entries(INPUTS))
    it(`${tool}: every creation as shown, in order, and nothing more`, async () => {
      const gw = await start({
        GATEWAY_APPS_FILE: appsFile('mcp-composite-', [
          { name: 'agent', scopes: ['cloud:read', 'cloud:write'], key: AGENT_KEY },
          { name: 'approver', scopes: ['cloud:approve'], key: APPROVER_KEY },
        ]),
        MCP_MUTATIONS: 'approve',
      });
      const c = await connect(gw, { key: AGENT_KEY });
      const planned = await c.call(tool, { input });
      expect(planned.isError, textOf(planned)).toBeFalsy();
      const plan = planned.structuredContent as {
        planId: string;
        creations: number;
        summary: string;
        requests: { steps: Step[] };
      };
      const shown = plan.requests.steps.filter((s) => s.action === 'CREATE');
      expect(shown).toHaveLength(plan.creations);
      expect(plan.summary.split('\n').filter((l) => l.startsWith('- '))).toHaveLength(plan.creations);
      expect((await gw.graphql(APPROVE, { id: plan.planId }, { key: APPROVER_KEY })).data).toEqual({
        approvePlan: { status: 'APPROVED' },
      });
      const ran = await c.call('execute_plan', { planId: plan.planId });
      expect(ran.isError, textOf(ran)).toBeFalsy();
      await gw.gateway.services.provisioning.idle();

      const sent = gw.gateway.sandbox.cloud!.requests.filter((r) => r.method === 'POST' && !r.path.startsWith('/iam'));
      expect(sent.map((r) => r.path)).toEqual(shown.map((s) => s.request!.path));
      const out: string[] = [];
      shown.forEach((s, i) => differences(s.request!.body, sent[i]!.body, `step ${i}`, out));
      expect(out).toEqual([]);
    });
});
