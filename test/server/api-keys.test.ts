import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

describe('API keys (GATEWAY_API_KEYS)', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway({ GATEWAY_API_KEYS: 'alpha-key, beta-key' });
  });
  afterAll(() => gw.close());

  it('refuses a request without a key with UNAUTHENTICATED (HTTP 401) and makes no upstream call', async () => {
    const res = await gw.graphql('mutation { createProject(input: { name: "x" }) { project { id } } }');
    expect(res.status).toBe(401);
    expect(res.errors![0]!.extensions!.code).toBe('UNAUTHENTICATED');
    expect(gw.gateway.sandbox.cloud!.requests).toHaveLength(0);
  });

  it('refuses a wrong key with UNAUTHENTICATED', async () => {
    const res = await gw.graphql('{ projects { id } }', {}, { key: 'wrong' });
    expect(res.status).toBe(401);
    expect(res.errors![0]!.extensions!.code).toBe('UNAUTHENTICATED');
    expect(res.errors![0]!.message).toBe('the API key is not valid');
  });

  it('accepts each configured key', async () => {
    for (const key of ['alpha-key', 'beta-key']) {
      const res = await gw.graphql('{ projects { id } }', {}, { key });
      expect(res.status).toBe(200);
      expect(res.errors).toBeUndefined();
    }
  });

  it('never logs a key', () => {
    expect(gw.logs()).not.toContain('alpha-key');
  });
});
