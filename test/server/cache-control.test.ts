import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

describe('Cache-Control of GraphQL responses', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway({ GATEWAY_API_KEYS: 'app-key' });
  });
  afterAll(() => gw.close());

  const post = async (query: string, variables: Record<string, unknown> = {}) => {
    const res = await request(`${gw.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer app-key' },
      body: JSON.stringify({ query, variables }),
    });
    const body = (await res.body.json()) as { data?: unknown; errors?: unknown[] };
    return { status: res.statusCode, cacheControl: res.headers['cache-control'], body };
  };

  it('is no-store on every answer of an operation: data, a failed mutation, a refused document, a variable error', async () => {
    const created = await post('mutation { createProject(input: { name: "cached?" }) { project { id name } } }');
    expect(created.status).toBe(200);
    expect(created.body.errors).toBeUndefined();
    expect(created.cacheControl).toBe('no-store');

    const query = await post('{ projects { id name } }');
    expect(query.body.errors).toBeUndefined();
    expect(query.cacheControl).toBe('no-store');

    const failed = await post(
      'mutation { createNetwork(input: { projectId: "3fa85f64-5717-4562-b3fc-2c963f66afa6", title: "n" }) { network { id } } }',
    );
    expect(failed.body.errors).toHaveLength(1);
    expect(failed.cacheControl).toBe('no-store');

    const invalid = await post('{ noSuchField }');
    expect(invalid.status).toBe(400);
    expect(invalid.cacheControl).toBe('no-store');

    const badVariable = await post('query($n: Int) { projects(first: $n) { id } }', { n: 'many' });
    expect(badVariable.status).toBe(400);
    expect(badVariable.cacheControl).toBe('no-store');
  });
});
