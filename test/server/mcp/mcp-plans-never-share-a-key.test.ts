// A plan shows each creation it runs, and each runs under a key of its own. A trusted document whose two creations
// take their idempotencyKey from the same variable (or the same hard-coded key) would be planned with one key for
// both: its approval would show two creations, and the run would create the first and refuse the second as
// IDEMPOTENCY_KEY_REUSED. Such a document cannot be planned: under MCP_MUTATIONS=approve it is not offered, and the
// start-up warning names the key and the creations that share it; a document with a key variable each is planned.
// Likewise a document with two creations under one response key, which GraphQL merges and runs once.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

import { upstreamCreations } from '../../helpers/cloud.js';
import { appsFile, gatewaysPerTest } from '../../helpers/gateway.js';
import { mcpClientsPerTest, textOf } from '../../helpers/mcp.js';

const start = gatewaysPerTest();
const connect = mcpClientsPerTest();

const AGENT_KEY = 'agent-key-0123456789';

const DOCUMENTS = {
  'shared-variable':
    'mutation SharedVariable($k: UUID) { a: createProject(input: { name: "a" }, idempotencyKey: $k) { project { id } } b: createProject(input: { name: "b" }, idempotencyKey: $k) { project { id } } }',
  'shared-literal':
    'mutation SharedLiteral { a: createProject(input: { name: "a" }, idempotencyKey: "6f1c2a9e-7d3b-4c5a-8e9f-0a1b2c3d4e5f") { project { id } } b: createProject(input: { name: "b" }, idempotencyKey: "6f1c2a9e-7d3b-4c5a-8e9f-0a1b2c3d4e5f") { project { id } } }',
  // Without a key, each creation is given one by its response key: two with one response key (the same field and
  // arguments, which GraphQL merges into one) would be planned as two and run as one.
  twice:
    'mutation Twice { createProject(input: { name: "a" }) { project { id } } createProject(input: { name: "a" }) { project { id } } }',
  'one-each':
    'mutation OneEach($k1: UUID, $k2: UUID) { a: createProject(input: { name: "a" }, idempotencyKey: $k1) { project { id } } b: createProject(input: { name: "b" }, idempotencyKey: $k2) { project { id } } }',
};

function setup() {
  const apps = appsFile('mcp-shared-key-', [{ name: 'agent', scopes: ['cloud:read', 'cloud:write'], key: AGENT_KEY }]);
  const dir = path.dirname(apps);
  const manifest = path.join(dir, 'manifest.json');
  fs.writeFileSync(manifest, JSON.stringify(DOCUMENTS));
  return {
    DATA_DIR: dir,
    GATEWAY_APPS_FILE: apps,
    MCP_MUTATIONS: 'approve',
    MCP_APPROVAL: 'elicitation',
    TRUSTED_DOCUMENTS: 'allow',
    TRUSTED_DOCUMENTS_MANIFEST: manifest,
  };
}

describe('two creations of one plan never share a key', () => {
  it('a document whose creations share a key variable or a hard-coded key is not offered, and the log names them', async () => {
    const gw = await start(setup());
    const c = await connect(gw, { key: AGENT_KEY, person: 'accept' });
    const names = await c.toolNames();
    expect(names).not.toContain('SharedVariable');
    expect(names).not.toContain('SharedLiteral');
    expect(gw.logs()).toMatch(/SharedVariable \(\$k is the idempotencyKey of a and b, which need one each\)/);
    expect(gw.logs()).toMatch(
      /SharedLiteral \(\\*"6f1c2a9e-7d3b-4c5a-8e9f-0a1b2c3d4e5f\\*" is the idempotencyKey of a and b, which need one each\)/,
    );
    expect(names).not.toContain('Twice');
    expect(gw.logs()).toMatch(/Twice \(createProject names two root fields, which GraphQL runs as one\)/);
    const refused = await c.call('SharedVariable', {});
    expect(refused.isError).toBe(true);
    expect(upstreamCreations(gw)).toEqual([]);
  });

  it('a document with a key variable per creation is planned, and runs both creations, each under its own key', async () => {
    const gw = await start(setup());
    const c = await connect(gw, { key: AGENT_KEY, person: 'accept' });
    const planned = await c.call('OneEach', {});
    expect(planned.structuredContent, textOf(planned)).toMatchObject({ status: 'PENDING', creations: 2 });
    const { planId } = planned.structuredContent as { planId: string };
    const executed = await c.call('execute_plan', { planId });
    expect(executed.isError, textOf(executed)).toBeFalsy();
    expect(upstreamCreations(gw)).toHaveLength(2);
    expect(new Set(upstreamCreations(gw).map((r) => r.headers['idempotency-key'])).size).toBe(2);
  });
});
