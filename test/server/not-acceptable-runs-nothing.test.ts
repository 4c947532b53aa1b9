// An Accept header that allows no JSON type is answered 406 by Apollo Server only after it has run the operation:
// a mutation created its resource while the app was told its request was not acceptable. Nothing may run for a 406.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { rawGraphQL } from '../helpers/raw-http.js';

const HEADERS = { 'content-type': 'application/json', authorization: 'Bearer app-key' };
const NOT_ACCEPTABLE =
  "An 'accept' header was provided for this request which does not accept application/json; charset=utf-8 or " +
  'application/graphql-response+json; charset=utf-8';

describe.each([
  ['with the direct path', true],
  ['through Apollo alone', false],
])('POST /graphql %s: a 406 runs nothing', (_name, directPath) => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway({ GATEWAY_API_KEYS: 'app-key', RATE_LIMIT_READS: '2/1h' }, { testing: { directPath } });
  });
  afterAll(() => gw?.close());

  it('a mutation with Accept: text/html is refused 406 and creates nothing', async () => {
    for (const accept of ['text/html', 'application/json;q=0', 'multipart/mixed']) {
      const body = JSON.stringify({
        query: `mutation { createProject(input: { name: "${accept}" }) { project { id } } }`,
      });
      const res = await rawGraphQL(gw.url, body, { ...HEADERS, accept });
      expect(res.status).toBe(406);
      expect(JSON.parse(res.body)).toEqual({
        errors: [{ message: NOT_ACCEPTABLE, extensions: { code: 'BAD_REQUEST' } }],
      });
    }
    const left = await gw.graphql<{ projects: unknown[] }>('{ projects { name } }', {}, { key: 'app-key' });
    expect(left.data).toEqual({ projects: [] });
  });

  it('a query refused 406 spends no rate-limit points', async () => {
    const body = JSON.stringify({ query: '{ projects { name } }' });
    for (let i = 0; i < 3; i++)
      expect((await rawGraphQL(gw.url, body, { ...HEADERS, accept: 'text/plain' })).status).toBe(406);
    // The same query by GET.
    const get = await fetch(`${gw.url}/graphql?query=${encodeURIComponent('{ projects { name } }')}`, {
      headers: { authorization: 'Bearer app-key', 'apollo-require-preflight': '1', accept: 'text/plain' },
    });
    expect(get.status).toBe(406);
    // One read was spent by the test before; one is left.
    expect((await rawGraphQL(gw.url, body, HEADERS)).status).toBe(200);
  });
});
