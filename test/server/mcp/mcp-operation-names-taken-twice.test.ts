// A tool is called by its name alone (docs/agents.md): of two trusted documents' operations of one name the first in
// the manifest is the tool, and the other, which no call could reach, is left out and named with its document in the
// warning of left-out operations, at start-up and at each reload, rather than dropped without a word.
import fs from 'node:fs';
import path from 'node:path';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';

import { appsFile, gatewaysPerTest, logLines, type TestGateway } from '../../helpers/gateway.js';
import { mcpClientsPerTest, textOf } from '../../helpers/mcp.js';

const start = gatewaysPerTest();
const connect = mcpClientsPerTest();

const AGENT_KEY = 'agent-key-0123456789';
const OPERATOR_KEY = 'operator-key-0123456789';

/** The operations each warning about left-out tools named, one list per warning. */
function leftOut(gw: TestGateway): string[][] {
  return logLines<{ msg: string; tools?: string[] }>(gw, (l) => /^MCP leaves out/.test(l.msg)).map(
    (l) => l.tools ?? [],
  );
}

describe('two trusted documents with an operation of one name', () => {
  it('offer the first as the tool and name the second in the warning, at start-up and at a reload', async () => {
    const apps = appsFile('mcp-name-twice-', [
      { name: 'agent', scopes: ['cloud:read'], key: AGENT_KEY },
      { name: 'ops', scopes: ['operator'], key: OPERATOR_KEY },
    ]);
    const dir = path.dirname(apps);
    const manifest = path.join(dir, 'manifest.json');
    fs.writeFileSync(
      manifest,
      JSON.stringify({
        'platforms-v1': 'query Platforms { catalog { platforms { name } } }',
        'platforms-v2': 'query Platforms { catalog { platforms { name wireValue } } }',
      }),
    );
    const gw = await start({
      DATA_DIR: dir,
      GATEWAY_APPS_FILE: apps,
      TRUSTED_DOCUMENTS: 'allow',
      TRUSTED_DOCUMENTS_MANIFEST: manifest,
    });
    const c = await connect(gw, { key: AGENT_KEY });
    expect((await c.toolNames()).filter((n) => n === 'Platforms')).toHaveLength(1);
    const called = await c.call('Platforms');
    expect(called.isError, textOf(called)).toBeFalsy();
    // The first document's text runs: it asks no wireValue.
    expect(JSON.stringify(called.structuredContent)).not.toContain('wireValue');
    expect(leftOut(gw)).toEqual([
      [expect.stringMatching(/^Platforms of trusted document platforms-v2 \(trusted document platforms-v1 /)],
    ]);

    fs.writeFileSync(
      manifest,
      JSON.stringify({
        'platforms-v1': 'query Platforms { catalog { platforms { name } } }',
        'platforms-v2': 'query Platforms { catalog { platforms { name wireValue } } }',
        'platforms-v3': 'query Platforms { catalog { platforms { wireValue } } }',
      }),
    );
    const res = await request(`${gw.url}/admin/reload`, {
      method: 'POST',
      headers: { authorization: `Bearer ${OPERATOR_KEY}` },
    });
    expect(res.statusCode, await res.body.text()).toBe(200);
    expect(leftOut(gw)[1]).toEqual([
      expect.stringMatching(/^Platforms of trusted document platforms-v2 \(trusted document platforms-v1 /),
      expect.stringMatching(/^Platforms of trusted document platforms-v3 \(trusted document platforms-v1 /),
    ]);
  });
});
