// A trusted document whose selection a directive hides behind a required variable (`@skip(if: $dry)`) is listed as an
// MCP tool like any other: its cost is estimated at start-up without variables, so the directive counts its selection
// as included (an upper bound), where reading `if` threw and stopped the gateway's start.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

import { appsFile, gatewaysPerTest } from '../../helpers/gateway.js';
import { mcpClientsPerTest } from '../../helpers/mcp.js';

const start = gatewaysPerTest();
const connect = mcpClientsPerTest();

const AGENT_KEY = 'agent-key-0123456789';
const MAYBE_PROJECT =
  'mutation MaybeProject($input: CreateProjectInput!, $dry: Boolean!) { createProject(input: $input) @skip(if: $dry) { replayed } }';
const MAYBE_READ = 'query MaybeProjects($all: Boolean!) { projects(first: 5) @include(if: $all) { id } }';

describe('a trusted document with a directive on a required variable', () => {
  it.each(['approve', 'all'] as const)('MCP_MUTATIONS=%s: the gateway starts and lists it', async (mutations) => {
    const apps = appsFile('mcp-directive-', [{ name: 'agent', scopes: ['cloud:read', 'cloud:write'], key: AGENT_KEY }]);
    const dir = path.dirname(apps);
    const manifest = path.join(dir, 'manifest.json');
    fs.writeFileSync(manifest, JSON.stringify({ maybe: MAYBE_PROJECT, read: MAYBE_READ }));
    const gw = await start({
      DATA_DIR: dir,
      GATEWAY_APPS_FILE: apps,
      MCP_MUTATIONS: mutations,
      TRUSTED_DOCUMENTS: 'allow',
      TRUSTED_DOCUMENTS_MANIFEST: manifest,
    });
    const c = await connect(gw, { key: AGENT_KEY });
    const names = await c.toolNames();
    expect(names).toContain('MaybeProjects');
    // Under approve a creation is offered only as a plan, and one a directive may hide has no dry run to show: it is
    // not offered (named at start-up); under all it runs at once.
    if (mutations === 'all') expect(names).toContain('MaybeProject');
    else expect(names).not.toContain('MaybeProject');
    const read = await c.call('MaybeProjects', { all: true });
    expect(read.isError, JSON.stringify(read)).toBeFalsy();
  });
});
