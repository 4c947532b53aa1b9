import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { M } from '../helpers/cloud.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

describe('cloud access tokens from CLOUD_API_CREDENTIALS', () => {
  let gw: TestGateway;
  const credentials = { login: 'svc-gateway', password: 'cloud-cred-secret' };
  beforeAll(async () => {
    gw = await startTestGateway({ CLOUD_API_CREDENTIALS: JSON.stringify(credentials) });
  });
  afterAll(() => gw.close());

  it('fetches a token once from POST /iam/v2/tokens, caches it, and uses it as Bearer', async () => {
    const sandbox = gw.gateway.sandbox.cloud!;
    await Promise.all([
      gw.graphql(M.project, { input: { name: 'a' } }),
      gw.graphql(M.project, { input: { name: 'b' } }),
    ]);
    await gw.graphql(M.project, { input: { name: 'c' } });
    const tokenCalls = sandbox.requests.filter((r) => r.path === '/iam/v2/tokens');
    expect(tokenCalls).toHaveLength(1);
    expect(tokenCalls[0]!.body).toEqual(credentials);
    const token = sandbox.issuedTokens[0]!.token;
    const creations = sandbox.requests.filter((r) => r.path !== '/iam/v2/tokens');
    expect(creations).toHaveLength(3);
    for (const r of creations) expect(r.headers.authorization).toBe(`Bearer ${token}`);
  });

  it('refreshes the token once when the upstream answers 401, and retries the call with the same key', async () => {
    const sandbox = gw.gateway.sandbox.cloud!;
    sandbox.expireAllTokens();
    sandbox.clearRequests();
    const res = await gw.graphql(M.project, { input: { name: 'after-expiry' } });
    expect(res.errors).toBeUndefined();
    expect(sandbox.requests.map((r) => `${r.path} ${r.status}`)).toEqual([
      '/apis/projects/public/v4/projects 401',
      '/iam/v2/tokens 200',
      '/apis/projects/public/v4/projects 201',
    ]);
    const [first, , second] = sandbox.requests;
    expect(first!.headers['idempotency-key']).toBe(second!.headers['idempotency-key']);
    expect(second!.headers.authorization).toBe(`Bearer ${sandbox.issuedTokens.at(-1)!.token}`);
  });

  it('never logs the credentials or the token', async () => {
    // The gateway sends the password and gets a token in this test (the cached one expired), whatever ran before.
    const sandbox = gw.gateway.sandbox.cloud!;
    sandbox.expireAllTokens();
    const issued = sandbox.issuedTokens.length;
    const res = await gw.graphql(M.project, { input: { name: 'logged-nothing' } });
    expect(res.errors).toBeUndefined();
    expect(sandbox.issuedTokens.length).toBeGreaterThan(issued);
    expect(sandbox.requests.filter((r) => r.path === '/iam/v2/tokens').at(-1)!.body).toEqual(credentials);
    const logs = gw.logs();
    expect(logs).not.toContain('cloud-cred-secret');
    for (const t of sandbox.issuedTokens) expect(logs).not.toContain(t.token);
  });
});
