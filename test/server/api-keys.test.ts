import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig, ConfigError } from '../../src/config.js';
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
    expect(gw.gateway.services.sandbox.cloud!.requests).toHaveLength(0);
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

describe('start-up configuration', () => {
  it('refuses to run open (no keys) when an upstream is real', () => {
    expect(() => loadConfig({ CLOUD_API_URL: 'https://cloud.example', CLOUD_API_TOKEN: 't' })).toThrow(/GATEWAY_API_KEYS/);
    expect(() => loadConfig({ CLOUD_API_URL: 'https://cloud.example', CLOUD_API_TOKEN: 't', GATEWAY_API_KEYS: 'k' })).not.toThrow();
  });

  it('names the variable of a bad value', () => {
    const cases: Record<string, string> = {
      PORT: 'eighty',
      CLOUD_API_URL: 'ftp://x',
      IDEMPOTENCY_RETENTION: 'forever',
      SANDBOX_FAULT_RATE: '2',
      DATABASE_URL: 'mysql://x',
      CLOUD_API_CREDENTIALS: '[1,2]',
      GRAPHQL_INTROSPECTION: 'maybe',
      LOG_LEVEL: 'loud',
    };
    for (const [name, value] of Object.entries(cases)) {
      let error: unknown;
      try {
        loadConfig({ [name]: value, GATEWAY_API_KEYS: 'k' });
      } catch (e) {
        error = e;
      }
      expect(error, name).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).variable).toBe(name);
      expect((error as Error).message).toContain(name);
    }
  });

  it('parses durations, lists and defaults into one frozen object', () => {
    const c = loadConfig({ IDEMPOTENCY_RETENTION: '90m', GATEWAY_API_KEYS: ' a , b ,', PORT: '8080' });
    expect(c.idempotencyRetentionMs).toBe(90 * 60_000);
    expect(c.apiKeys).toEqual(['a', 'b']);
    expect(c.port).toBe(8080);
    expect(c.eventRetentionMs).toBe(7 * 86_400_000);
    expect(Object.isFrozen(c) && Object.isFrozen(c.upstream)).toBe(true);
  });
});
