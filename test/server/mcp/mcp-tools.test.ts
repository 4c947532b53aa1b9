// The MCP endpoint (docs/decisions/060) with the SDK's own client over real HTTP: tools per scope and per toolset, a
// read, bad arguments, refusals that name the scope, the rate limit, and the Host check. Every tool call goes through
// the execution pipeline, as HTTP, WebSocket and SSE do.
import fs from 'node:fs';
import path from 'node:path';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';

import { appsFile, gatewaysPerTest, tempDataDir } from '../../helpers/gateway.js';
import { mcpClientsPerTest, textOf } from '../../helpers/mcp.js';

const start = gatewaysPerTest();
const connect = mcpClientsPerTest();

const WATCHER_KEY = 'watcher-key-0123456789';
const BUILDER_KEY = 'builder-key-0123456789';
const ADMIN_KEY = 'admin-key-0123456789';
const appsFileOf = () =>
  appsFile('mcp-apps-', [
    { name: 'watcher', scopes: ['mobile-id:read'], key: WATCHER_KEY },
    { name: 'builder', scopes: ['cloud:read', 'cloud:write'], key: BUILDER_KEY },
    { name: 'admin', scopes: ['operator', 'cloud:read'], key: ADMIN_KEY },
  ]);

describe('MCP tools', () => {
  it.each(['auto', 'legacy'] as const)(
    'each app lists only the tools its scopes allow (%s protocol era)',
    async (era) => {
      const gw = await start({ GATEWAY_APPS_FILE: appsFileOf(), MCP_MUTATIONS: 'all' });
      const watcher = await (await connect(gw, { key: WATCHER_KEY, era })).toolNames();
      expect(watcher).toEqual(['mobile_id_authentication', 'wait_for_events']);
      const builder = await (await connect(gw, { key: BUILDER_KEY, era })).toolNames();
      expect(builder).toEqual(
        expect.arrayContaining([
          'catalog',
          'projects',
          'plan_kafka_cluster',
          'create_network',
          'provision_kafka_cluster',
        ]),
      );
      expect(builder).not.toContain('mobile_id_authentication');
      expect(builder).not.toContain('register_verification');
    },
  );

  it('an operation the GraphQL limits refuse is left out of the tools, named in a start-up warning, and the gateway starts', async () => {
    const gw = await start({ GATEWAY_API_KEYS: 'agent:k1', GRAPHQL_MAX_DEPTH: '2' });
    const names = await (await connect(gw, { key: 'k1' })).toolNames();
    // `catalog` selects three levels deep: depth 2 refuses it, so it is left out; shallower reads stay.
    expect(names).not.toContain('catalog');
    expect(names.length).toBeGreaterThan(0);
    expect(gw.logs()).toMatch(/MCP leaves out the operations the GraphQL limits refuse/);
    expect(gw.logs()).toMatch(/catalog \(Query depth limit of 2 exceeded/);
  });

  it('a tool is described from the schema: enum values, UUID formats, descriptions, output schema and honest annotations', async () => {
    const gw = await start({ GATEWAY_API_KEYS: 'agent:k1', MCP_MUTATIONS: 'all' });
    const c = await connect(gw, { key: 'k1' });
    const { tools } = await c.client.listTools();
    const network = tools.find((t) => t.name === 'create_network')!;
    const input = (network.inputSchema.properties as Record<string, any>).input;
    expect(input.properties.defaultFirewallAction.enum).toEqual(['ALLOW']);
    expect(input.properties.projectId.description).toMatch(/\S/);
    expect((network.inputSchema.properties as Record<string, any>).idempotencyKey.format).toBe('uuid');
    expect(network.description).toMatch(/network/i);
    expect(network.annotations).toMatchObject({ readOnlyHint: false, destructiveHint: true, idempotentHint: true });
    expect(network.outputSchema?.properties).toHaveProperty('createNetwork');
    const catalog = tools.find((t) => t.name === 'catalog')!;
    expect(catalog.annotations).toMatchObject({ readOnlyHint: true, destructiveHint: false });
  });

  it.each(['allow', 'enforce'] as const)(
    'the named operations of the trusted documents are tools (TRUSTED_DOCUMENTS=%s)',
    async (mode) => {
      const dir = tempDataDir('mcp-manifest-');
      const manifest = path.join(dir, 'manifest.json');
      fs.writeFileSync(
        manifest,
        JSON.stringify({ 'list-projects': 'query ListProjects($first: Int) { projects(first: $first) { id name } }' }),
      );
      const gw = await start({
        GATEWAY_API_KEYS: 'agent:k1',
        TRUSTED_DOCUMENTS: mode,
        TRUSTED_DOCUMENTS_MANIFEST: manifest,
      });
      const c = await connect(gw, { key: 'k1' });
      const names = await c.toolNames();
      expect(names).toContain('ListProjects');
      // Under enforce only the manifest's documents run, for agents too: no built-in tool is offered.
      if (mode === 'enforce') expect(names).toEqual(['ListProjects']);
      else expect(names).toContain('catalog');
      const listed = (await c.client.listTools()).tools.find((t) => t.name === 'ListProjects')!;
      expect((listed.inputSchema.properties as Record<string, { type: string }>).first!.type).toBe('integer');
      expect((await c.call('ListProjects', { first: 5 })).structuredContent).toEqual({ projects: [] });
    },
  );

  it('a read returns its data as structuredContent that matches the output schema', async () => {
    const gw = await start({ GATEWAY_APPS_FILE: appsFileOf() });
    await gw.graphql(
      'mutation { createProject(input: { name: "seen-by-agents" }) { project { id } } }',
      {},
      { key: BUILDER_KEY },
    );
    const c = await connect(gw, { key: BUILDER_KEY });
    const result = await c.call('projects', { first: 10 });
    expect(result.isError).toBeFalsy();
    expect(result.structuredContent!.projects).toEqual([
      expect.objectContaining({ name: 'seen-by-agents', id: expect.any(String) }),
    ]);
    expect(JSON.parse(textOf(result))).toEqual(result.structuredContent);
  });

  it('bad arguments get a tool error naming the argument path, and nothing is sent upstream', async () => {
    const gw = await start({ GATEWAY_API_KEYS: 'agent:k1', MCP_MUTATIONS: 'all' });
    const c = await connect(gw, { key: 'k1' });
    gw.gateway.sandbox.cloud!.clearRequests();
    const missing = await c.call('create_network', { input: { title: 'n' } });
    expect(missing.isError).toBe(true);
    expect(missing.structuredContent!.errors).toEqual(
      expect.arrayContaining([expect.objectContaining({ code: 'BAD_USER_INPUT', argument: 'input.projectId' })]),
    );
    expect(textOf(missing)).toMatch(/Invalid argument input\.projectId/);
    const wrongType = await c.call('projects', { first: 'ten' });
    expect(wrongType.structuredContent!.errors[0]).toMatchObject({ code: 'BAD_USER_INPUT', argument: 'first' });
    const unknown = await c.call('projects', { frist: 10 });
    expect(unknown.structuredContent!.errors[0]).toMatchObject({ argument: 'frist' });
    const domain = await c.call('create_subnet', {
      input: {
        projectId: '3fa85f64-5717-4562-b3fc-2c963f66afa6',
        networkId: '3fa85f64-5717-4562-b3fc-2c963f66afa7',
        title: 's',
        cidr: '10.0.0.300/24',
      },
    });
    expect(domain.isError).toBe(true);
    expect(domain.structuredContent!.errors[0]).toMatchObject({ code: 'BAD_USER_INPUT', argument: 'input.cidr' });
    expect(gw.gateway.sandbox.cloud!.requests.filter((r) => r.method === 'POST' && !r.path.startsWith('/iam'))).toEqual(
      [],
    );
  });

  it('a refusal of an argument names its path once, as "Invalid argument <path>: <why>"', async () => {
    const gw = await start({ GATEWAY_API_KEYS: 'agent:k1', MCP_MUTATIONS: 'all' });
    const c = await connect(gw, { key: 'k1' });
    const domain = await c.call('create_subnet', {
      input: {
        projectId: '3fa85f64-5717-4562-b3fc-2c963f66afa6',
        networkId: '3fa85f64-5717-4562-b3fc-2c963f66afa7',
        title: 's',
        cidr: '10.0.0.1/24',
      },
    });
    expect(domain.structuredContent!.errors[0]).toMatchObject({ code: 'BAD_USER_INPUT', argument: 'input.cidr' });
    expect(textOf(domain)).toBe(
      'Invalid argument input.cidr: 10.0.0.1/24 has host bits set; the block starts at 10.0.0.0/24',
    );
    const missing = await c.call('create_network', { input: { title: 'n' } });
    expect(textOf(missing)).toMatch(/^Invalid argument input\.projectId: Variable "\$input" got invalid value/);
  });

  it("a call of a tool outside the app's scopes is refused naming the missing scope, and nothing runs", async () => {
    const gw = await start({ GATEWAY_APPS_FILE: appsFileOf() });
    const c = await connect(gw, { key: WATCHER_KEY });
    const refused = await c.call('projects', {});
    expect(refused.isError).toBe(true);
    expect(refused.structuredContent).toMatchObject({ code: 'FORBIDDEN', scope: 'cloud:read' });
    expect(textOf(refused)).toMatch(/needs the scope cloud:read/);
  });

  it('MCP_MUTATIONS=none (the default) offers reads and plans only, and no creation tool runs', async () => {
    const gw = await start({ GATEWAY_API_KEYS: 'agent:k1' });
    const c = await connect(gw, { key: 'k1' });
    const names = await c.toolNames();
    expect(names).toEqual(expect.arrayContaining(['catalog', 'plan_kafka_cluster', 'plan_virtual_machine']));
    expect(
      names.filter(
        (n) => n.startsWith('create_') || n.startsWith('provision_') || n === 'execute_plan' || n === 'execute',
      ),
    ).toEqual([]);
    const refused = await c.call('create_project', { input: { name: 'x' } });
    expect(refused.isError).toBe(true);
    expect((await gw.graphql('{ projects { id } }', {}, { key: 'k1' })).data).toEqual({ projects: [] });
  });

  it('MCP_TOOLSETS publishes named endpoints, each with its own tools, and an unknown toolset is not found', async () => {
    const gw = await start({
      GATEWAY_API_KEYS: 'agent:k1',
      MCP_MUTATIONS: 'all',
      MCP_TOOLSETS: 'support=catalog,projects,verification_results;internal=*',
    });
    expect(await (await connect(gw, { key: 'k1', path: '/mcp/support' })).toolNames()).toEqual([
      'catalog',
      'projects',
      'verification_results',
    ]);
    const internal = await (await connect(gw, { key: 'k1', path: '/mcp/internal' })).toolNames();
    expect(internal).toContain('provision_kafka_cluster');
    const support = await connect(gw, { key: 'k1', path: '/mcp/support' });
    const outside = await support.call('create_project', { input: { name: 'x' } });
    expect(outside.isError).toBe(true);
    const res = await request(`${gw.url}/mcp/nope`, {
      method: 'POST',
      headers: {
        authorization: 'Bearer k1',
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: '{}',
    });
    expect(res.statusCode).toBe(404);
    await res.body.dump();
  });

  it('the read-only execute tool is offered with MCP_EXECUTE=true to operator apps only, and refuses a mutation', async () => {
    const gw = await start({ GATEWAY_APPS_FILE: appsFileOf(), MCP_EXECUTE: 'true' });
    expect(await (await connect(gw, { key: BUILDER_KEY })).toolNames()).not.toContain('execute');
    const admin = await connect(gw, { key: ADMIN_KEY });
    expect(await admin.toolNames()).toContain('execute');
    const read = await admin.call('execute', { query: '{ projects { id } }' });
    expect(read.structuredContent).toEqual({ projects: [] });
    const write = await admin.call('execute', {
      query: 'mutation { createProject(input: { name: "no" }) { project { id } } }',
    });
    expect(write.isError).toBe(true);
    expect(textOf(write)).toMatch(/query operations only, not a mutation/);
    expect((await gw.graphql('{ projects { id } }', {}, { key: ADMIN_KEY })).data).toEqual({ projects: [] });
  });

  it('the rate limit holds over MCP: past the limit a tool call is refused with RATE_LIMITED and its retry-after', async () => {
    const gw = await start({ GATEWAY_API_KEYS: 'agent:k1', RATE_LIMIT_READS: '2/1h' });
    const c = await connect(gw, { key: 'k1' });
    expect((await c.call('catalog')).isError).toBeFalsy();
    expect((await c.call('projects')).isError).toBeFalsy();
    const limited = await c.call('projects');
    expect(limited.isError).toBe(true);
    expect(limited.structuredContent!.errors[0]).toMatchObject({
      code: 'RATE_LIMITED',
      retryAfterSeconds: expect.any(Number),
    });
  });

  it('wait_for_events spends the reads budget: past the limit it is refused with RATE_LIMITED and nothing is read', async () => {
    const gw = await start({ GATEWAY_API_KEYS: 'agent:k1', RATE_LIMIT_READS: '2/1h' });
    const c = await connect(gw, { key: 'k1' });
    expect((await c.call('wait_for_events', { timeoutSeconds: 0 })).isError).toBeFalsy();
    expect((await c.call('wait_for_events', { timeoutSeconds: 0 })).isError).toBeFalsy();
    const limited = await c.call('wait_for_events', { timeoutSeconds: 0 });
    expect(limited.isError).toBe(true);
    expect(limited.structuredContent!.errors[0]).toMatchObject({
      code: 'RATE_LIMITED',
      retryAfterSeconds: expect.any(Number),
    });
  });

  it('a request without a key is refused with 401 before anything else', async () => {
    const gw = await start({ GATEWAY_API_KEYS: 'agent:k1' });
    const res = await request(`${gw.url}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
    });
    expect(res.statusCode).toBe(401);
    expect(res.headers['www-authenticate']).toBe('Bearer');
    await res.body.dump();
  });

  it('a Host header that is not allowed is refused with 403 and never reaches a tool (DNS rebinding)', async () => {
    const gw = await start({ GATEWAY_API_KEYS: 'agent:k1' });
    const body = JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: { name: 'projects', arguments: {} },
    });
    const headers = {
      authorization: 'Bearer k1',
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
    };
    const rebound = await request(`${gw.url}/mcp`, {
      method: 'POST',
      headers: { ...headers, host: 'attacker.example' },
      body,
    });
    expect(rebound.statusCode).toBe(403);
    expect(await rebound.body.text()).toMatch(/attacker\.example|Host/i);
    const foreignOrigin = await request(`${gw.url}/mcp`, {
      method: 'POST',
      headers: { ...headers, origin: 'https://attacker.example' },
      body,
    });
    expect(foreignOrigin.statusCode).toBe(403);
    await foreignOrigin.body.dump();
  });

  it('MCP_ALLOWED_HOSTS lets a named host through', async () => {
    const gw = await start({ GATEWAY_API_KEYS: 'agent:k1', MCP_ALLOWED_HOSTS: 'gateway.internal' });
    const res = await request(`${gw.url}/mcp`, {
      method: 'POST',
      headers: {
        host: 'gateway.internal',
        authorization: 'Bearer k1',
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
      }),
    });
    expect(res.statusCode).toBe(200);
    await res.body.dump();
  });
});
