// A PUBLIC_URL that holds a password (https://proxy:password@gw.example, for a proxy in front of the gateway): the
// password is used where an upstream or the app's platform calls the gateway back (a verification's callbackUrl, an
// identification's callback address), and shown nowhere else: not in the MCP protected resource metadata or the 401
// challenge that anyone may read, not in a plan's approveUrl an agent reads, not in GraphiQL's examples.
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { appsFile, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { ISSUER, signingKey, startJwksServer, type JwksServer } from '../helpers/jwt.js';
import { mcpClient, textOf } from '../helpers/mcp.js';

const PASSWORD = 'SECRET-proxy-pw-4c7e19a2b6';
const PUBLIC_URL = `https://proxy:${PASSWORD}@gw.example`;
const KEY = 'public-url-key-0123456789';
const HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

let jwks: JwksServer;
let gw: TestGateway;
beforeAll(async () => {
  jwks = await startJwksServer([await signingKey('k1')]);
  gw = await startTestGateway({
    PUBLIC_URL,
    AUTH_JWKS_URL: jwks.url,
    AUTH_ISSUER: ISSUER,
    AUTH_AUDIENCE: 'gateway',
    AUTH_APPS: '*',
    GATEWAY_APPS_FILE: appsFile('public-url-', [
      { name: 'agent', scopes: ['cloud:read', 'cloud:write', 'identity:read', 'identity:write'], key: KEY },
    ]),
    MCP_MUTATIONS: 'approve',
  });
});
afterAll(async () => {
  await gw?.close();
  await jwks?.stop();
});

describe('a PUBLIC_URL with a password', () => {
  it('is used in the callback addresses handed to an upstream and to the app', async () => {
    const registered = await gw.graphql(
      `mutation { registerVerification(input: { workflowId: "wf-pub", applicant: { firstName: "Ada" } }) { verification { externalId } } }`,
      undefined,
      { key: KEY },
    );
    expect(registered.errors, JSON.stringify(registered.errors)).toBeUndefined();
    const sent = gw.gateway.sandbox.verification!.requests.find((r) => r.method === 'POST');
    expect(String((sent!.body as { callbackUrl: string }).callbackUrl)).toMatch(
      new RegExp(`^https://proxy:${PASSWORD}@gw\\.example/webhooks/verification/`),
    );
    const callback = await gw.graphql(`{ identificationCallbackUrl(workflowId: "wf-pub") }`, undefined, { key: KEY });
    expect(callback.data!.identificationCallbackUrl).toMatch(
      new RegExp(`^https://proxy:${PASSWORD}@gw\\.example/webhooks/identification/`),
    );
  });

  it('is not in the MCP protected resource metadata, nor in the challenge of a 401', async () => {
    const metadata = await request(`${gw.url}/.well-known/oauth-protected-resource/mcp`);
    expect(metadata.statusCode).toBe(200);
    expect(((await metadata.body.json()) as { resource: string }).resource).toBe('https://gw.example/mcp');
    const missing = await request(`${gw.url}/mcp`, { method: 'POST', headers: HEADERS, body: '{}' });
    expect(missing.statusCode).toBe(401);
    await missing.body.dump();
    expect(missing.headers['www-authenticate']).toBe(
      'Bearer resource_metadata="https://gw.example/.well-known/oauth-protected-resource/mcp"',
    );
  });

  it("is not in a plan's approveUrl, which the agent reads", async () => {
    const agent = await mcpClient(gw, { key: KEY });
    try {
      const planned = await agent.call('create_project', { input: { name: 'pub' } });
      expect(planned.isError, textOf(planned)).toBeFalsy();
      const planId = planned.structuredContent!.planId as string;
      expect(planned.structuredContent!.approveUrl).toBe(`https://gw.example/approvals?plan=${planId}`);
      expect(JSON.stringify(planned)).not.toContain(PASSWORD);
    } finally {
      await agent.close();
    }
  });

  it('is in no log line', () => {
    expect(gw.logs()).not.toContain(PASSWORD);
  });
});

describe('a PUBLIC_URL with a password, on an open sandbox gateway', () => {
  it("is not in GraphiQL's page, whose examples show the notification webhook's address", async () => {
    const open = await startTestGateway({ PUBLIC_URL });
    try {
      const page = await request(`${open.url}/graphql`, { headers: { accept: 'text/html' } });
      expect(page.statusCode).toBe(200);
      const html = await page.body.text();
      expect(html).toContain('https://gw.example/webhooks/mobile-id');
      expect(html).not.toContain(PASSWORD);
    } finally {
      await open.close();
    }
  });
});
