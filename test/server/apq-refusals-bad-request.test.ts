// An automatic persisted query the client got wrong (a version other than 1, a hash that is not its text's) is the
// client's bad input: with TRUSTED_DOCUMENTS off, Apollo refuses it with a 400 and an error of no code, which it fills
// in as INTERNAL_SERVER_ERROR. The contract keeps that code for the unexpected, answered with no message of its own:
// these are BAD_REQUEST, with Apollo's words, over POST and GET, and the log holds no unexpected error for them.
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

const QUERY = '{ __typename }';
const WRONG_HASH = '0'.repeat(64);

let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway();
});
afterAll(async () => {
  await gw?.close();
});

const CASES = [
  {
    name: 'a version other than 1',
    persistedQuery: { version: 2, sha256Hash: WRONG_HASH },
    message: 'Unsupported persisted query version',
  },
  { name: 'no version', persistedQuery: {}, message: 'Unsupported persisted query version' },
  {
    name: "a hash that is not the text's",
    persistedQuery: { version: 1, sha256Hash: WRONG_HASH },
    message: 'provided sha does not match query',
  },
];

async function post(extensions: unknown) {
  const res = await request(`${gw.url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ query: QUERY, extensions }),
  });
  return { status: res.statusCode, body: (await res.body.json()) as { errors: any[] } };
}

async function get(extensions: unknown) {
  const search = new URLSearchParams({ query: QUERY, extensions: JSON.stringify(extensions) });
  const res = await request(`${gw.url}/graphql?${search}`, {
    headers: { accept: 'application/json', 'apollo-require-preflight': 'true' },
  });
  return { status: res.statusCode, body: (await res.body.json()) as { errors: any[] } };
}

describe('an automatic persisted query the client got wrong', () => {
  for (const c of CASES)
    for (const [method, send] of [
      ['POST', post],
      ['GET', get],
    ] as const)
      it(`${c.name}, over ${method}: 400 BAD_REQUEST saying what is wrong, never INTERNAL_SERVER_ERROR`, async () => {
        const logged = gw.logs().length;
        const answer = await send({ persistedQuery: c.persistedQuery });
        expect(answer.status).toBe(400);
        expect(answer.body.errors).toEqual([{ message: c.message, extensions: { code: 'BAD_REQUEST' } }]);
        // Bad input, not a fault of the gateway's: no unexpected error logged for it.
        expect(gw.logs().slice(logged)).not.toMatch(/"level":50/);
      });
});
