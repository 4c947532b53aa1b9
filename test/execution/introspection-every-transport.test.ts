// GRAPHQL_INTROSPECTION is one validation rule that every transport applies: HTTP, graphql-ws and graphql-sse
// answer an introspection query the same way. And it defaults to on only while every upstream is sandboxed.
import { describe, expect, it } from 'vitest';

import { loadConfig } from '../../src/config/index.js';
import { gatewaysPerTest, type TestGateway } from '../helpers/gateway.js';
import { operationOver } from '../helpers/operation.js';

const start = gatewaysPerTest();
const INTROSPECTION = '{ __schema { queryType { name } } }';

describe('GRAPHQL_INTROSPECTION=false', () => {
  it.each(['http', 'ws', 'sse'] as const)(
    'refuses an introspection query over %s, and still runs other queries',
    async (transport) => {
      const gw = await start({ GRAPHQL_INTROSPECTION: 'false' });
      const run = (q: string) =>
        transport === 'http' ? gw.graphql(q) : operationOver(transport, gw, null, { query: q });
      const refused = await run(INTROSPECTION);
      expect(refused.data ?? undefined).toBeUndefined();
      expect(JSON.stringify(refused.errors)).toMatch(/introspection has been disabled/);
      expect((await run('{ projects { id } }')).data).toEqual({ projects: [] });
    },
  );
});

describe('introspection by default', () => {
  it.each(['http', 'ws', 'sse'] as const)(
    'is answered over %s while every upstream is sandboxed',
    async (transport) => {
      const gw = await start();
      const res =
        transport === 'http'
          ? await gw.graphql(INTROSPECTION)
          : await operationOver(transport, gw, null, { query: INTROSPECTION });
      expect(res.data).toEqual({ __schema: { queryType: { name: 'Query' } } });
    },
  );

  it('is off once an upstream is real, unless GRAPHQL_INTROSPECTION=true', () => {
    const real = {
      CLOUD_API_URL: 'https://cloud.example',
      CLOUD_API_TOKEN: 'token',
      SANDBOX_UPSTREAMS: 'identification,verification,rfm,mobile-id',
      GATEWAY_API_KEYS: 'app-key',
    };
    expect(loadConfig({}).introspection).toBe(true);
    expect(loadConfig(real).introspection).toBe(false);
    expect(loadConfig({ ...real, GRAPHQL_INTROSPECTION: 'true' }).introspection).toBe(true);
    expect(loadConfig({ GRAPHQL_INTROSPECTION: 'false' }).introspection).toBe(false);
  });

  it('refuses introspection over HTTP at a gateway with a real upstream', async () => {
    const sandbox = await start();
    const gw = await start({
      CLOUD_API_URL: sandbox.gateway.sandbox.cloud!.url,
      CLOUD_API_TOKEN: 'token',
      SANDBOX_UPSTREAMS: 'identification,verification,rfm,mobile-id',
      GATEWAY_API_KEYS: 'app-key',
    });
    const res = await gw.graphql(INTROSPECTION, {}, { key: 'app-key' });
    expect(JSON.stringify(res.errors)).toMatch(/introspection has been disabled/);
  });
});

describe('authentication before any parse', () => {
  it('caches no plan for requests without a valid key, and answers each with 401 UNAUTHENTICATED', async () => {
    const gw = await start({ GATEWAY_API_KEYS: 'app-key' });
    const plans = gw.gateway.directPath!;
    const before = plans.compiledDocuments;
    for (let i = 0; i < 50; i++) {
      const res = await fetch(`${gw.url}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: i % 2 ? 'Bearer wrong-key' : '' },
        body: JSON.stringify({ query: `{ projects(first: ${i + 1}) { id } }` }),
      });
      expect(res.status).toBe(401);
      expect(
        ((await res.json()) as { errors: Array<{ extensions: { code: string } }> }).errors[0]!.extensions.code,
      ).toBe('UNAUTHENTICATED');
    }
    expect(plans.compiledDocuments).toBe(before);
    // With the key, the same path plans as before.
    expect((await gw.graphql('{ projects(first: 1) { id } }', {}, { key: 'app-key' })).data).toEqual({ projects: [] });
    expect(plans.compiledDocuments).toBe(before + 1);
  });
});
