// GraphQL over HTTP (POST and GET /graphql) runs queries and mutations; subscriptions run over WebSocket and SSE
// (docs/contract.md, Routes). A subscription sent over HTTP is the client's mistake: refused before anything runs
// (no rate-limit point spent, no resolver called) with BAD_REQUEST, and not logged as an unexpected error. A POST gets
// 400 naming where subscriptions run, the same on the direct path and through Apollo (it used to run with a plain
// execute and answer INTERNAL_SERVER_ERROR); a GET gets Apollo's own 405 for any operation but a query.
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

const KEY = 'http-subscription-key';
const SUBSCRIPTIONS = [
  'subscription { heartbeat(count: 1) }',
  'subscription { mobileIdAuthentication(authReqId: "x") { __typename } }',
  'subscription S($after: String) { verificationCompleted(after: $after) { externalId } }',
];

/** The log lines at level error or above (pino: 50 error, 60 fatal). */
const errorsLogged = (gw: TestGateway, from: number): string[] =>
  gw
    .logs()
    .slice(from)
    .split('\n')
    .filter((line) => line && (JSON.parse(line) as { level: number }).level >= 50);

type Answer = { status: number; body: { data?: unknown; errors?: Array<{ message: string; extensions?: any }> } };

async function post(gw: TestGateway, body: unknown): Promise<Answer> {
  const res = await request(`${gw.url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}` },
    body: JSON.stringify(body),
  });
  return { status: res.statusCode, body: JSON.parse(await res.body.text()) };
}

async function get(gw: TestGateway, query: string): Promise<Answer & { allow: unknown }> {
  const res = await request(`${gw.url}/graphql?${new URLSearchParams({ query })}`, {
    method: 'GET',
    headers: { authorization: `Bearer ${KEY}`, accept: 'application/json', 'apollo-require-preflight': 'true' },
  });
  return { status: res.statusCode, allow: res.headers.allow, body: JSON.parse(await res.body.text()) };
}

function expectRefused(answer: Answer, what: string): void {
  expect(answer.status, what).toBe(400);
  expect(answer.body.data, what).toBeUndefined();
  expect(answer.body.errors, what).toHaveLength(1);
  const [error] = answer.body.errors!;
  expect(error!.extensions, what).toEqual({ code: 'BAD_REQUEST' });
  expect(error!.message, what).toBe(
    'this call runs query or mutation operations only, not a subscription; nothing was run. ' +
      'Subscriptions run over WebSocket (/graphql) and Server-Sent Events (/graphql/stream)',
  );
}

describe.each([
  ['the direct path', true],
  ['Apollo', false],
] as const)('a subscription sent over HTTP, answered by %s', (_path, directPath) => {
  let gw: TestGateway;
  beforeAll(async () => {
    // One read point an hour: a subscription that spent one would leave the query below refused.
    gw = await startTestGateway(
      { GATEWAY_API_KEYS: KEY, RATE_LIMIT_READS: '1/1h' },
      { testing: { directPath: directPath ? undefined : false } },
    );
    expect(gw.gateway.directPath === null).toBe(!directPath);
  });
  afterAll(async () => {
    await gw?.close();
  });

  it('is refused with BAD_REQUEST and 400 before anything runs, and nothing is logged as an error', async () => {
    const before = gw.logs().length;
    const direct = gw.gateway.directPath?.stats.direct ?? 0;
    for (const query of SUBSCRIPTIONS) {
      expectRefused(await post(gw, { query, variables: { after: 'bm90LWEtY3Vyc29y' } }), `POST ${query}`);
      expect(await get(gw, query), `GET ${query}`).toEqual({
        status: 405,
        allow: 'POST',
        body: {
          errors: [
            {
              message: 'GET requests only support query operations, not subscription operations',
              extensions: { code: 'BAD_REQUEST' },
            },
          ],
        },
      });
    }
    if (directPath) expect(gw.gateway.directPath!.stats.direct - direct).toBe(SUBSCRIPTIONS.length);
    expect(errorsLogged(gw, before)).toEqual([]);
    // No read point was spent by the refused subscriptions: the one of the hour answers this query.
    const query = await post(gw, { query: '{ __typename }' });
    expect(query).toEqual({ status: 200, body: { data: { __typename: 'Query' } } });
  });
});
