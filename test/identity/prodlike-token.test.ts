import fs from 'node:fs';
import { describe, expect, it } from 'vitest';

import { ENV_VARS, loadConfig } from '../../src/config/index.js';
import { startIdentificationSandbox } from '../../src/sandbox/identification.js';
import { startTestGateway } from '../helpers/gateway.js';

const CREATE = /* GraphQL */ `
  mutation Create($input: CreateIdentificationInput!) {
    createIdentification(input: $input) {
      identification {
        id
        environment
      }
    }
  }
`;

// Two identification interfaces served over loopback HTTP, each accepting only its own token, stand in for the
// real production and pre-production-like environments (spec: Addresses).
describe('the pre-production-like identification environment gets its own token', () => {
  it('sends IDENTIFICATION_PRODLIKE_API_TOKEN to PRODLIKE and IDENTIFICATION_API_TOKEN to PRODUCTION, and logs neither', async () => {
    const prod = await startIdentificationSandbox({ acceptedTokens: ['production-token-1'] });
    const pre = await startIdentificationSandbox({ acceptedTokens: ['prodlike-token-2'], environment: 'prodlike' });
    const t = await startTestGateway({
      GATEWAY_API_KEYS: 'app-key',
      SANDBOX_UPSTREAMS: 'cloud,verification,rfm,mobile-id',
      IDENTIFICATION_API_URL: prod.url,
      IDENTIFICATION_PRODLIKE_API_URL: pre.url,
      IDENTIFICATION_API_TOKEN: 'production-token-1',
      IDENTIFICATION_PRODLIKE_API_TOKEN: 'prodlike-token-2',
    });
    try {
      const a = await t.graphql(CREATE, { input: { workflowId: 'wf' } }, { key: 'app-key' });
      const b = await t.graphql(CREATE, { input: { workflowId: 'wf', environment: 'PRODLIKE' } }, { key: 'app-key' });
      expect(a.errors).toBeUndefined();
      expect(b.errors).toBeUndefined();
      expect(b.data!.createIdentification.identification.environment).toBe('PRODLIKE');
      expect(prod.requests.map((r) => [r.headers.authorization, r.status])).toEqual([
        ['Bearer production-token-1', 202],
      ]);
      expect(pre.requests.map((r) => [r.headers.authorization, r.status])).toEqual([['Bearer prodlike-token-2', 202]]);
      expect(t.logs()).not.toContain('production-token-1');
      expect(t.logs()).not.toContain('prodlike-token-2');
    } finally {
      await t.close();
      await Promise.all([prod.close(), pre.close()]);
    }
  });

  it('sends the production token to PRODLIKE when IDENTIFICATION_PRODLIKE_API_TOKEN is unset', async () => {
    const prod = await startIdentificationSandbox({ acceptedTokens: ['production-token-1'] });
    const pre = await startIdentificationSandbox({ acceptedTokens: ['production-token-1'], environment: 'prodlike' });
    const t = await startTestGateway({
      GATEWAY_API_KEYS: 'app-key',
      SANDBOX_UPSTREAMS: 'cloud,verification,rfm,mobile-id',
      IDENTIFICATION_API_URL: prod.url,
      IDENTIFICATION_PRODLIKE_API_URL: pre.url,
      IDENTIFICATION_API_TOKEN: 'production-token-1',
    });
    try {
      const b = await t.graphql(CREATE, { input: { workflowId: 'wf', environment: 'PRODLIKE' } }, { key: 'app-key' });
      expect(b.errors).toBeUndefined();
      expect(pre.requests.map((r) => [r.headers.authorization, r.status])).toEqual([
        ['Bearer production-token-1', 202],
      ]);
      expect(prod.requests).toHaveLength(0);
    } finally {
      await t.close();
      await Promise.all([prod.close(), pre.close()]);
    }
  });

  it('answers UPSTREAM_UNAUTHENTICATED for PRODLIKE when its own token is wrong, while PRODUCTION keeps working', async () => {
    const prod = await startIdentificationSandbox({ acceptedTokens: ['production-token-1'] });
    const pre = await startIdentificationSandbox({ acceptedTokens: ['prodlike-token-2'], environment: 'prodlike' });
    const t = await startTestGateway({
      GATEWAY_API_KEYS: 'app-key',
      SANDBOX_UPSTREAMS: 'cloud,verification,rfm,mobile-id',
      IDENTIFICATION_API_URL: prod.url,
      IDENTIFICATION_PRODLIKE_API_URL: pre.url,
      IDENTIFICATION_API_TOKEN: 'production-token-1',
      IDENTIFICATION_PRODLIKE_API_TOKEN: 'a-stale-prodlike-token',
    });
    try {
      const b = await t.graphql(CREATE, { input: { workflowId: 'wf', environment: 'PRODLIKE' } }, { key: 'app-key' });
      expect(b.errors?.[0]?.extensions).toMatchObject({ code: 'UPSTREAM_UNAUTHENTICATED', status: 401 });
      const a = await t.graphql(CREATE, { input: { workflowId: 'wf' } }, { key: 'app-key' });
      expect(a.errors).toBeUndefined();
    } finally {
      await t.close();
      await Promise.all([prod.close(), pre.close()]);
    }
  });

  it('says in the configuration table that an unset IDENTIFICATION_PRODLIKE_API_TOKEN means the production token', () => {
    const declared = ENV_VARS.find((v) => v.name === 'IDENTIFICATION_PRODLIKE_API_TOKEN');
    expect(declared?.default).toBe('(unset: IDENTIFICATION_API_TOKEN)');
    const reference = fs.readFileSync(new URL('../../docs/configuration.md', import.meta.url), 'utf8');
    const row = reference.split('\n').find((line) => line.startsWith('| `IDENTIFICATION_PRODLIKE_API_TOKEN` |'));
    expect(row).toContain('(unset: IDENTIFICATION_API_TOKEN)');
    expect(row).toContain('production token');
    expect(loadConfig({ IDENTIFICATION_PRODLIKE_API_TOKEN: '  ' }).identification.prodlikeToken).toBeUndefined();
  });
});
