// MCP allows a tool a name of at most 128 characters (of A-Z, a-z, 0-9, _, . and -): a trusted document's operation
// named longer cannot be a tool, and is left out and named with its document in the warning of left-out operations,
// at start-up and at each reload, as a name taken twice is, rather than dropped without a word.
import { describe, expect, it } from 'vitest';

import { appsFile, gatewaysPerTest } from '../../helpers/gateway.js';
import {
  AGENT_KEY,
  leftOutTools as leftOut,
  manifestBeside,
  mcpClientsPerTest,
  OPERATOR_KEY,
  reloadAsOperator,
} from '../../helpers/mcp.js';

const start = gatewaysPerTest();
const connect = mcpClientsPerTest();

const LONGEST = `P${'l'.repeat(127)}`;
const TOO_LONG = `P${'l'.repeat(128)}`;
const ALSO_TOO_LONG = `Q${'l'.repeat(199)}`;

describe('a trusted document whose operation is named longer than an MCP tool may be', () => {
  it('is left out and named with its document in the warning, at start-up and at a reload', async () => {
    const apps = appsFile('mcp-name-too-long-', [
      { name: 'agent', scopes: ['cloud:read'], key: AGENT_KEY },
      { name: 'ops', scopes: ['operator'], key: OPERATOR_KEY },
    ]);
    const documents: Record<string, string> = {
      longest: `query ${LONGEST} { catalog { platforms { name } } }`,
      'too-long': `query ${TOO_LONG} { catalog { platforms { name } } }`,
    };
    const manifest = manifestBeside(apps, documents);
    const gw = await start(manifest.env);
    const c = await connect(gw, { key: AGENT_KEY });
    const names = await c.toolNames();
    // 128 characters is a tool's name; 129 is not, and is not offered.
    expect(names).toContain(LONGEST);
    expect(names).not.toContain(TOO_LONG);
    expect(leftOut(gw)).toEqual([
      [expect.stringMatching(new RegExp(`^${TOO_LONG} of trusted document too-long \\(.*129 characters long`))],
    ]);

    manifest.write({ ...documents, 'also-too-long': `mutation ${ALSO_TOO_LONG} { __typename }` });
    await reloadAsOperator(gw);
    expect(leftOut(gw)[1]).toEqual([
      expect.stringMatching(new RegExp(`^${TOO_LONG} of trusted document too-long \\(.*129 characters long`)),
      expect.stringMatching(new RegExp(`^${ALSO_TOO_LONG} of trusted document also-too-long \\(.*200 characters long`)),
    ]);
  });
});
