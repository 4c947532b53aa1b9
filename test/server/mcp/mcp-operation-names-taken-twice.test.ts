// A tool is called by its name alone (docs/agents.md): of two trusted documents' operations of one name the first in
// the manifest is the tool, and the other, which no call could reach, is left out and named with its document in the
// warning of left-out operations, at start-up and at each reload, rather than dropped without a word.
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

describe('two trusted documents with an operation of one name', () => {
  it('offer the first as the tool and name the second in the warning, at start-up and at a reload', async () => {
    const apps = appsFile('mcp-name-twice-', [
      { name: 'agent', scopes: ['cloud:read'], key: AGENT_KEY },
      { name: 'ops', scopes: ['operator'], key: OPERATOR_KEY },
    ]);
    const manifest = manifestBeside(apps, {
      'platforms-v1': 'query Platforms { catalog { platforms { name } } }',
      'platforms-v2': 'query Platforms { catalog { platforms { name wireValue } } }',
    });
    const gw = await start(manifest.env);
    const c = await connect(gw, { key: AGENT_KEY });
    expect((await c.toolNames()).filter((n) => n === 'Platforms')).toHaveLength(1);
    const called = await c.call('Platforms');
    expect(called.isError, textOf(called)).toBeFalsy();
    // The first document's text runs: it asks no wireValue.
    expect(JSON.stringify(called.structuredContent)).not.toContain('wireValue');
    expect(leftOut(gw)).toEqual([
      [expect.stringMatching(/^Platforms of trusted document platforms-v2 \(trusted document platforms-v1 /)],
    ]);

    manifest.write({
      'platforms-v1': 'query Platforms { catalog { platforms { name } } }',
      'platforms-v2': 'query Platforms { catalog { platforms { name wireValue } } }',
      'platforms-v3': 'query Platforms { catalog { platforms { wireValue } } }',
    });
    await reloadAsOperator(gw);
    expect(leftOut(gw)[1]).toEqual([
      expect.stringMatching(/^Platforms of trusted document platforms-v2 \(trusted document platforms-v1 /),
      expect.stringMatching(/^Platforms of trusted document platforms-v3 \(trusted document platforms-v1 /),
    ]);
  });
});
