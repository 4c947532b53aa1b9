import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { tempDataDir } from '../helpers/gateway.js';
import { gatewayProcesses } from '../helpers/process.js';

const spawnGateway = gatewayProcesses();

/** Starts `node --import tsx src/main.ts` on port 0 and resolves with its start-up log line. */
async function startProcess(env: Record<string, string>): Promise<{ url: string; msg: string; line: string }> {
  const { url, line } = await spawnGateway(env);
  return { url, msg: (JSON.parse(line) as { msg: string }).msg, line };
}

describe('the start-up line', () => {
  it('tells the operator the identification callback route and where to read the address, without printing a token', async () => {
    const { url, msg, line } = await startProcess({ DATA_DIR: tempDataDir() });
    expect(msg).toContain(`identification callbacks POST ${url}/webhooks/identification/<token>`);
    expect(msg).toContain('identificationCallbackUrl(workflowId:');

    const res = await request(`${url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: '{ identificationCallbackUrl(workflowId: "wf-onboarding") }' }),
    });
    const address = ((await res.body.json()) as { data: { identificationCallbackUrl: string } }).data.identificationCallbackUrl;
    expect(address.startsWith(`${url}/webhooks/identification/`)).toBe(true);
    expect(line).not.toContain(address.split('/').at(-1)!);
  });
});
