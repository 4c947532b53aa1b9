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
    const address = ((await res.body.json()) as { data: { identificationCallbackUrl: string } }).data
      .identificationCallbackUrl;
    expect(address.startsWith(`${url}/webhooks/identification/`)).toBe(true);
    expect(line).not.toContain(address.split('/').at(-1)!);
  });

  it('shows PUBLIC_URL without the password it holds (a proxy in front of the gateway may ask for one)', async () => {
    const { line } = await startProcess({ DATA_DIR: tempDataDir(), PUBLIC_URL: 'https://gw:s3cret-pub@gw.example' });
    expect(line).toContain('gw.example/webhooks/identification/<token>');
    expect(line).not.toContain('s3cret-pub');
  });

  it("shows the mobile-ID sandbox's notification token (a secret of the data directory) and the named apps, never a key", async () => {
    const dataDir = tempDataDir();
    const env = { DATA_DIR: dataDir, GATEWAY_API_KEYS: 'shop:key-of-the-shop-123,crm:key-of-the-crm-456' };
    const { url, msg, line } = await startProcess(env);
    const token = /mobile-ID sandbox: POST (\S+) with Authorization: Bearer (sandbox-[0-9a-f]{32})/.exec(msg);
    expect(token?.[1]).toBe(`${url}/webhooks/mobile-id`);
    expect(msg).toContain('apps crm, shop');
    expect(line).not.toContain('key-of-the-shop-123');

    const res = await request(`${url}/webhooks/mobile-id`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token![2]}` },
      body: JSON.stringify({ auth_req_id: 'startup-line-1', error: 'access_denied', error_description: 'refused' }),
    });
    expect(res.statusCode).toBe(204);
    await res.body.dump();
  });
});
