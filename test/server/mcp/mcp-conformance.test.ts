// The protocol's conformance suite (@modelcontextprotocol/conformance) against /mcp of a gateway on port 0
// (docs/decisions/060). Its command needs Node >= 22: under an older Node it runs on the `node` package of the npm
// registry (npx -p node@26), which needs nothing but the registry npm already uses.
import { execFile } from 'node:child_process';
import { createRequire } from 'node:module';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

import { gatewaysPerTest, tempDataDir } from '../../helpers/gateway.js';

const start = gatewaysPerTest();
const require = createRequire(import.meta.url);
const conformancePackage = require.resolve('@modelcontextprotocol/conformance/package.json');
const cli = conformancePackage.replace(/package\.json$/, 'dist/index.js');
const major = Number(process.versions.node.split('.')[0]);
const [command, prefix] = major >= 22 ? [process.execPath, []] : ['npx', ['-y', '-p', 'node@26', 'node']];

/**
 * The scenarios that apply to this server. The others test the suite's "everything" fixture server (tools named
 * test_image_content, test_sampling…, fixed resources and prompts, logging), which a gateway whose tools are its
 * GraphQL operations does not have (resources-read-*, resources-templates-read and resources-subscribe ask for test://
 * resources; this endpoint's resources are the SDL, the catalog and the event resources, and it is stateless, so a
 * 2025 resources/subscribe fails by design: docs/decisions/064).
 */
const SCENARIOS = [
  'server-initialize',
  'ping',
  'tools-list',
  'tools-call-error',
  'dns-rebinding-protection',
  'resources-list',
];

describe('MCP conformance', () => {
  it.each(SCENARIOS)(
    'passes the conformance scenario %s',
    async (scenario) => {
      const gw = await start({});
      const run = await promisify(execFile)(
        command,
        [...prefix, cli, 'server', '--url', `${gw.url}/mcp`, '--scenario', scenario],
        { cwd: tempDataDir('mcp-conformance-'), timeout: 120_000 },
      ).then(
        ({ stdout }) => ({ code: 0, out: stdout }),
        (err: { code?: number; stdout?: string; stderr?: string }) => ({
          code: err.code ?? -1,
          out: `${err.stdout ?? ''}${err.stderr ?? ''}`,
        }),
      );
      expect(run.out).toMatch(/Passed: [1-9]\d*\/\d+, 0 failed/);
      expect(run.code, run.out).toBe(0);
    },
    180_000,
  );
});
