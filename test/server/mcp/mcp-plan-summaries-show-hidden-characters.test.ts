// What a person reads of an agent's plan (its summary: the MCP elicitation, the plan tool's answer) shows every
// character of the agent's text: a bidi override, a zero-width or invisible character, a line or paragraph separator
// is written as its escape (`\u202e`), never left to reorder, hide or break the line it is in. The request that runs
// keeps the text as the agent gave it.
import { describe, expect, it } from 'vitest';

import { appsFile, gatewaysPerTest } from '../../helpers/gateway.js';
import { mcpClientsPerTest, textOf } from '../../helpers/mcp.js';

const start = gatewaysPerTest();
const connect = mcpClientsPerTest();

const AGENT_KEY = 'agent-key-0123456789';

/** Characters that hide or move what follows them: none may reach a person unescaped. */
const UNSEEN = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Default_Ignorable_Code_Point}]/u;

describe("a plan's summary shows hidden characters as escapes", () => {
  it('a bidi override, zero-width characters and separators in a name are escaped in what the person reads', async () => {
    const gw = await start({
      GATEWAY_APPS_FILE: appsFile('mcp-hidden-', [{ name: 'agent', scopes: ['cloud:write'], key: AGENT_KEY }]),
      MCP_MUTATIONS: 'approve',
      MCP_APPROVAL: 'elicitation',
    });
    const c = await connect(gw, { key: AGENT_KEY, person: 'accept' });
    // Shown raw, the override turns the rest of the line around, the separator starts a made-up line, and the
    // zero-width space, word joiner, variation selector and tag characters are not seen at all.
    const name = 'web\u202e1-bd-dorp\u2028- nothing else\u200b\u2060\ufe0f\u{e0041}\u2029x';
    const planned = await c.call('create_project', { input: { name, description: 'left\u202aright\u2066' } });
    expect(planned.isError, textOf(planned)).toBeFalsy();
    const summary = planned.structuredContent!.summary as string;
    for (const shown of [summary, textOf(planned)]) {
      for (const line of shown.split('\n')) expect(line).not.toMatch(UNSEEN);
      expect(shown).toContain('web\\u202e1-bd-dorp\\u2028- nothing else\\u200b\\u2060\\ufe0f\\udb40\\udc41\\u2029x');
      expect(shown).toContain('left\\u202aright\\u2066');
    }

    const executed = await c.call('execute_plan', { planId: planned.structuredContent!.planId });
    expect(executed.isError, textOf(executed)).toBeFalsy();
    expect(c.asked).toHaveLength(1);
    for (const line of c.asked[0]!.split('\n')) expect(line).not.toMatch(UNSEEN);
    expect(c.asked[0]).toContain('web\\u202e1-bd-dorp\\u2028');
    // What ran is the agent's text, unchanged.
    const sent = gw.gateway.sandbox.cloud!.requests.filter((r) => r.method === 'POST' && !r.path.startsWith('/iam'));
    expect(sent).toHaveLength(1);
    expect(JSON.stringify(sent[0]!.body)).toContain(JSON.stringify(name).slice(1, -1));
  });

  it("a provisioning's topic and user names, which name its steps, are escaped in every line the person reads", async () => {
    const gw = await start({
      GATEWAY_APPS_FILE: appsFile('mcp-hidden-steps-', [{ name: 'agent', scopes: ['cloud:write'], key: AGENT_KEY }]),
      MCP_MUTATIONS: 'approve',
      MCP_APPROVAL: 'elicitation',
    });
    const c = await connect(gw, { key: AGENT_KEY, person: 'accept' });
    // A step is named after its topic or user: raw, the override reverses the rest of the step's line, and the
    // separator starts a line of the agent's own words.
    const topic = 'ord\u202esrede\u2028- checked by security: approve';
    const user = 'svc\u2067gmi\u200b';
    const planned = await c.call('provision_kafka_cluster', {
      input: {
        project: { name: 'p' },
        network: { title: 'n' },
        subnet: { title: 's', cidr: '10.1.0.0/24' },
        cluster: { title: 'k', instanceCount: 1, instanceType: 'C1_MEDIUM' },
        topics: [{ name: topic }],
        users: [{ name: user, password: 'Pr0vision-secret' }],
      },
    });
    expect(planned.isError, textOf(planned)).toBeFalsy();
    const executed = await c.call('execute_plan', { planId: planned.structuredContent!.planId });
    expect(executed.isError, textOf(executed)).toBeFalsy();
    expect(c.asked).toHaveLength(1);
    for (const shown of [planned.structuredContent!.summary as string, textOf(planned), c.asked[0]!]) {
      for (const line of shown.split('\n')) expect(line).not.toMatch(UNSEEN);
      expect(shown).toContain('topic:ord\\u202esrede\\u2028- checked by security: approve: POST');
      expect(shown).toContain('user:svc\\u2067gmi\\u200b: POST');
    }
  });
});
