// The names of the gateway's own tools are reserved (docs/agents.md): a trusted document's operation named as one
// (execute_plan, execute, wait_for_events, a built-in operation tool) is left out, named with its document in a
// warning at start-up and at each reload, and the gateway's tool keeps working; the rest of the manifest is offered.
import { describe, expect, it } from 'vitest';

import { appsFile, gatewaysPerTest } from '../../helpers/gateway.js';
import {
  AGENT_KEY,
  leftOutTools as leftOut,
  manifestBeside,
  mcpClientsPerTest,
  OPERATOR_KEY,
  reloadAsOperator,
  textOf,
} from '../../helpers/mcp.js';

const start = gatewaysPerTest();
const connect = mcpClientsPerTest();

const PLATFORMS = '{ catalog { platforms { name } } }';

describe("a trusted document's operation named as a gateway tool", () => {
  it('is left out and named in a warning; the gateway tools keep working, the rest of the manifest is offered', async () => {
    const apps = appsFile('mcp-reserved-', [
      { name: 'agent', scopes: ['cloud:read', 'cloud:write', 'mobile-id:read', 'operator'], key: AGENT_KEY },
    ]);
    const manifest = manifestBeside(apps, {
      'as-execute-plan': `query execute_plan ${PLATFORMS}`,
      'as-execute': `query execute ${PLATFORMS}`,
      'as-wait': `query wait_for_events ${PLATFORMS}`,
      'as-catalog': `query catalog ${PLATFORMS}`,
      platforms: `query Platforms ${PLATFORMS}`,
    });
    const gw = await start({ ...manifest.env, MCP_MUTATIONS: 'approve', MCP_EXECUTE: 'true' });
    const c = await connect(gw, { key: AGENT_KEY });
    const { tools } = await c.client.listTools();
    const names = tools.map((t) => t.name);
    for (const name of ['execute_plan', 'execute', 'wait_for_events', 'catalog'])
      expect(
        names.filter((n) => n === name),
        name,
      ).toHaveLength(1);
    expect(names).toContain('Platforms');
    expect(tools.find((t) => t.name === 'execute_plan')!.title).toBe('Execute an approved plan');

    // Each is the gateway's own tool, not the trusted document's catalog read.
    const plan = await c.call('execute_plan', { planId: '00000000-0000-4000-8000-000000000000' });
    expect(plan.structuredContent, textOf(plan)).toMatchObject({ errors: [{ code: 'NOT_FOUND' }] });
    const executed = await c.call('execute', { query: '{ projects { id } }' });
    expect(executed.isError, textOf(executed)).toBeFalsy();
    expect(executed.structuredContent).toHaveProperty('projects');
    const waited = await c.call('wait_for_events', { kinds: ['mobile-id'], timeoutSeconds: 0 });
    expect(waited.isError, textOf(waited)).toBeFalsy();
    expect(waited.structuredContent).toMatchObject({ events: [], timedOut: true });
    const catalog = await c.call('catalog');
    expect(catalog.isError, textOf(catalog)).toBeFalsy();

    const [warned] = leftOut(gw);
    for (const [name, document] of [
      ['execute_plan', 'as-execute-plan'],
      ['execute', 'as-execute'],
      ['wait_for_events', 'as-wait'],
      ['catalog', 'as-catalog'],
    ])
      expect(warned, name).toContainEqual(
        expect.stringMatching(new RegExp(`^${name} of trusted document ${document} .*gateway's own tool`)),
      );
    expect(warned!.join('\n')).not.toMatch(/Platforms/);
  });

  it('brought by a reload is left out too, and named in that reload’s warning', async () => {
    const apps = appsFile('mcp-reserved-reload-', [
      { name: 'agent', scopes: ['cloud:read', 'cloud:write'], key: AGENT_KEY },
      { name: 'ops', scopes: ['operator'], key: OPERATOR_KEY },
    ]);
    const manifest = manifestBeside(apps, { platforms: `query Platforms ${PLATFORMS}` });
    const gw = await start({ ...manifest.env, MCP_MUTATIONS: 'approve' });
    expect(leftOut(gw)).toEqual([]);
    manifest.write({
      platforms: `query Platforms ${PLATFORMS}`,
      'as-execute-plan': `query execute_plan ${PLATFORMS}`,
    });
    await reloadAsOperator(gw);
    expect(leftOut(gw)).toEqual([[expect.stringMatching(/^execute_plan of trusted document as-execute-plan /)]]);
    const c = await connect(gw, { key: AGENT_KEY });
    const names = await c.toolNames();
    expect(names.filter((n) => n === 'execute_plan')).toHaveLength(1);
    const plan = await c.call('execute_plan', { planId: '00000000-0000-4000-8000-000000000000' });
    expect(plan.structuredContent, textOf(plan)).toMatchObject({ errors: [{ code: 'NOT_FOUND' }] });
  });
});
