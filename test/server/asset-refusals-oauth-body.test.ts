import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

// docs/contract.md, Routes: the plain HTTP routes answer their refusals with `{ "error", "error_description" }`, the
// GraphiQL assets under /graphql/assets/ as much as /healthz or /approvals, so a client reads every refusal one way.

let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway();
});
afterAll(async () => {
  await gw?.close();
});

async function send(method: string, path: string) {
  const res = await request(`${gw.url}${path}`, { method: method as 'GET' });
  const text = await res.body.text();
  return { status: res.statusCode, headers: res.headers, text };
}

describe('a refused GraphiQL asset is answered as every plain route refuses', () => {
  it.each([
    ['an unknown file', 'GET', '/graphql/assets/no-such-file.js', 404, 'not_found'],
    ['a name the assets never have', 'GET', '/graphql/assets/..%2Fpackage.json', 404, 'not_found'],
    ['a method other than GET and HEAD', 'POST', '/graphql/assets/graphiql.js', 405, 'method_not_allowed'],
  ])('%s: %s %s → %i %s', async (_what, method, path, status, error) => {
    const res = await send(method, path);
    expect(res.status).toBe(status);
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(JSON.parse(res.text)).toEqual({ error, error_description: expect.any(String) });
    if (status === 405) expect(res.headers.allow).toBe('GET, HEAD');
  });

  it('as /healthz refuses: the same body shape for the same refusal', async () => {
    const res = await send('POST', '/healthz');
    expect(res.status).toBe(405);
    expect(JSON.parse(res.text)).toEqual({ error: 'method_not_allowed', error_description: expect.any(String) });
  });
});
