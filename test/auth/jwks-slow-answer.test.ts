// A JWKS that answers a byte at a time, never finishing: each byte comes before the fetch's idle timeout, so only a
// deadline on the whole fetch ends it. The token waiting for those keys gets 503 UPSTREAM_UNAVAILABLE naming the
// deadline, nothing is cached, and the next fetch (the provider well again) admits the token.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';

import type { TestGateway } from '../helpers/gateway.js';
import { sign, signingKey, startJwtGateway, testClock, type JwksServer } from '../helpers/jwt.js';

const stops: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const stop of stops.splice(0).reverse()) await stop();
});

describe('a JWKS that answers too slowly', () => {
  it('is given up at the deadline of the whole fetch: the token gets 503, nothing is cached, a later fetch admits it', async () => {
    const key = await signingKey('slow-1');
    let dripping = true;
    let requests = 0;
    const server = http.createServer((_req, res) => {
      requests += 1;
      if (!dripping) {
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [key.publicJwk] }));
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"keys":[');
      const drip = setInterval(() => res.write(' '), 100);
      res.on('close', () => clearInterval(drip));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    stops.push(() => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    });
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/certs`;
    const clock = testClock();
    const t: TestGateway = await startJwtGateway(
      { url } as JwksServer,
      { AUTH_JWKS_REFRESH_INTERVAL: '1m' },
      { testing: { clock: clock.now } },
    );
    stops.push(() => t.close());
    const token = await sign(key);

    const res = await t.graphql('{ __typename }', undefined, { key: token });
    expect(res.status).toBe(503);
    expect(res.errors![0]!.extensions!.code).toBe('UPSTREAM_UNAVAILABLE');
    expect(res.errors![0]!.message).toMatch(
      /could not be fetched: GET http:\/\/127\.0\.0\.1:\d+\/certs did not answer in full within 5 s/,
    );

    dripping = false;
    clock.advance(60_000);
    const again = await t.graphql('{ __typename }', undefined, { key: token });
    expect(again).toEqual({ status: 200, data: { __typename: 'Query' } });
    expect(requests).toBeGreaterThanOrEqual(2);
  }, 20_000);
});
