import { afterEach, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

const started: TestGateway[] = [];
afterEach(async () => {
  await Promise.all(started.splice(0).map((g) => g.close()));
});

const BROWSER_ACCEPT = 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8';

describe('introspection and the GraphiQL page', () => {
  it('serves GraphiQL to a browser and answers introspection by default', async () => {
    const gw = await startTestGateway();
    started.push(gw);
    const page = await fetch(`${gw.url}/graphql`, { headers: { accept: BROWSER_ACCEPT } });
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/text\/html/);
    expect(await page.text()).toContain('/graphql/assets/');
    const res = await gw.graphql('{ __schema { queryType { name } } }');
    expect(res.data).toEqual({ __schema: { queryType: { name: 'Query' } } });
  });

  it('answers a browser HEAD of the page as its GET, without the body', async () => {
    const gw = await startTestGateway();
    started.push(gw);
    const get = await fetch(`${gw.url}/graphql`, { headers: { accept: BROWSER_ACCEPT } });
    const page = await get.text();
    const head = await fetch(`${gw.url}/graphql`, { method: 'HEAD', headers: { accept: BROWSER_ACCEPT } });
    expect(head.status).toBe(200);
    for (const name of ['content-type', 'content-length', 'content-security-policy', 'cache-control', 'vary'])
      expect(head.headers.get(name), name).toBe(get.headers.get(name));
    expect(Number(head.headers.get('content-length'))).toBe(Buffer.byteLength(page));
    expect(await head.text()).toBe('');
  });

  it('serves neither the page nor introspection with GRAPHQL_INTROSPECTION=false', async () => {
    const gw = await startTestGateway({ GRAPHQL_INTROSPECTION: 'false' });
    started.push(gw);
    const page = await fetch(`${gw.url}/graphql`, { headers: { accept: BROWSER_ACCEPT } });
    expect(page.headers.get('content-type') ?? '').not.toMatch(/text\/html/);
    await page.body?.cancel();
    const head = await fetch(`${gw.url}/graphql`, { method: 'HEAD', headers: { accept: BROWSER_ACCEPT } });
    expect(head.headers.get('content-type') ?? '').not.toMatch(/text\/html/);
    const asset = await fetch(`${gw.url}/graphql/assets/graphiql.js`);
    expect(asset.status).toBe(404);
    await asset.body?.cancel();
    const res = await gw.graphql('{ __schema { queryType { name } } }');
    expect(res.errors![0]!.extensions!.code).toBe('GRAPHQL_VALIDATION_FAILED');
    // ordinary operations still work
    expect((await gw.graphql('{ projects { id } }')).data).toEqual({ projects: [] });
  });
});
