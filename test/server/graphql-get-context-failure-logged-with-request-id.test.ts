// An unexpected failure while GET /graphql makes its request's context (here the JWT check throws what it never
// should: an Error, or a GraphQLError without a code) is answered 500 INTERNAL_SERVER_ERROR with no message of its
// own, and logged in full with the request's id, as POST's direct path does (docs/contract.md, Error codes).
import { GraphQLError } from 'graphql';
import { request } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';

import { JwtAuthenticator } from '../../src/auth/jwt.js';
import type { TestGateway } from '../helpers/gateway.js';
import { sign, signingKey, startJwksServer, startJwtGateway, type JwksServer } from '../helpers/jwt.js';

const SECRET = 'secret-context-detail /var/lib/context';

let jwks: JwksServer;
let gw: TestGateway;
beforeAll(async () => {
  const key = await signingKey('k1');
  jwks = await startJwksServer([key]);
  gw = await startJwtGateway(jwks);
  token = await sign(key);
});
afterAll(async () => {
  await gw?.close();
  await jwks?.stop();
});
afterEach(() => {
  vi.restoreAllMocks();
});
let token: string;

/** The log lines holding `text`, parsed. */
const linesWith = (text: string) =>
  gw
    .logs()
    .split('\n')
    .filter((line) => line.includes(text))
    .map((line) => JSON.parse(line) as { requestId?: unknown; msg?: unknown });

describe('GET /graphql, the context failing unexpectedly', () => {
  it.each([
    ['GET', 'an Error', 'get-error'],
    ['POST', 'an Error', 'post-error'],
    ['GET', 'a GraphQLError without a code', 'get-graphql'],
    ['POST', 'a GraphQLError without a code', 'post-graphql'],
  ] as const)(
    '%s, the context throwing %s: 500 masked, logged once with the request id',
    async (method, kind, mark) => {
      const secret = `${SECRET} ${mark}`;
      const error = kind === 'an Error' ? new Error(secret) : new GraphQLError(secret);
      vi.spyOn(JwtAuthenticator.prototype, 'authenticate').mockRejectedValue(error);
      const requestId = `context-fails-${mark}`;
      const headers = {
        authorization: `Bearer ${token}`,
        'x-request-id': requestId,
        'apollo-require-preflight': 'true',
        'content-type': 'application/json',
      };
      const res =
        method === 'GET'
          ? await request(`${gw.url}/graphql?query=${encodeURIComponent('{ __typename }')}`, { headers })
          : await request(`${gw.url}/graphql`, {
              method: 'POST',
              headers,
              body: JSON.stringify({ query: '{ __typename }' }),
            });
      const text = await res.body.text();
      expect(res.statusCode).toBe(500);
      expect(res.headers['x-request-id']).toBe(requestId);
      expect(text).not.toContain('secret-context-detail');
      expect(JSON.parse(text).errors[0].extensions.code).toBe('INTERNAL_SERVER_ERROR');
      const logged = linesWith(secret);
      expect(logged).toHaveLength(1);
      expect(logged[0]!.requestId).toBe(requestId);
    },
  );
});
