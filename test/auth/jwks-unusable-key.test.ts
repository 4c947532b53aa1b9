// A fetched JWKS that holds a key the gateway cannot use (an RSA modulus that is no 2048-bit number, a point off its
// curve, a key type or curve it does not verify with, an alg that is not its key type's, a private key): a token that
// names that key's kid is answered as for a JWKS that cannot be read (503 UPSTREAM_UNAVAILABLE, WebSocket close 1013),
// never as the app's fault, and the operator reads one warning naming the JWKS URL (without its user info) and the kid,
// never the token; it is not logged as an unexpected error. Tokens of the JWKS's other keys keep working.
import { exportJWK, generateKeyPair, SignJWT, type JWK } from 'jose';
import { afterEach, describe, expect, it } from 'vitest';

import type { TestGateway } from '../helpers/gateway.js';
import {
  AUDIENCE,
  ISSUER,
  sign,
  signingKey,
  startJwksServer,
  startJwtGateway,
  type JwksServer,
  type SigningKey,
} from '../helpers/jwt.js';
import { operationOver } from '../helpers/operation.js';

const TYPENAME = '{ __typename }';
const PASSWORD = 'jwks-userinfo-pw';

const running: Array<TestGateway | JwksServer> = [];
afterEach(async () => {
  for (const r of running.splice(0).reverse()) await ('stop' in r ? r.stop() : r.close());
});

/** A key whose private half signs tokens, published under `kid` as `publish` rewrites its public JWK. */
async function unusable(kid: string, alg: string, publish: (jwk: JWK) => JWK): Promise<SigningKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const jwk = publish({ ...(await exportJWK(publicKey)), kid, alg, use: 'sig' });
  return { kid, alg, privateKey, publicJwk: jwk };
}

const CASES: Array<[string, () => Promise<SigningKey>]> = [
  ['an RSA key whose modulus is malformed', () => unusable('broken', 'RS256', (k) => ({ ...k, n: 'AAAA' }))],
  ['an EC key whose point is not on its curve', () => unusable('broken', 'ES256', (k) => ({ ...k, x: 'AAAA' }))],
  [
    'an EC key of a curve the gateway does not verify with',
    () => unusable('broken', 'ES256', (k) => ({ ...k, crv: 'secp256k1' })),
  ],
  [
    'a key of a type the gateway does not verify with',
    () => unusable('broken', 'ES256', (k) => ({ kty: 'XYZ', kid: k.kid, use: 'sig' })),
  ],
  ['an RSA key whose alg is not an RSA algorithm', () => unusable('broken', 'RS256', (k) => ({ ...k, alg: 'ES256' }))],
  [
    'a private key',
    async () => {
      const { privateKey } = await generateKeyPair('ES256', { extractable: true });
      return {
        kid: 'broken',
        alg: 'ES256',
        privateKey,
        publicJwk: { ...(await exportJWK(privateKey)), kid: 'broken' },
      };
    },
  ],
];

describe('a JWKS that holds a key the gateway cannot use', () => {
  it.each(CASES)(
    '%s: its kid is answered 503 naming the JWKS and the kid; the other keys keep working',
    async (_, make) => {
      const good = await signingKey('good');
      const broken = await make();
      const jwks = await startJwksServer([good, broken]);
      running.push(jwks);
      const t = await startJwtGateway({ ...jwks, url: jwks.url.replace('http://', `http://svc:${PASSWORD}@`) });
      running.push(t);

      const token = await new SignJWT({ azp: 'shop', scope: 'cloud:read' })
        .setProtectedHeader({ alg: broken.alg, kid: 'broken', typ: 'JWT' })
        .setIssuer(ISSUER)
        .setAudience(AUDIENCE)
        .setIssuedAt()
        .setExpirationTime('1h')
        .sign(broken.privateKey);
      const res = await t.graphql(TYPENAME, undefined, { key: token });
      expect(res.status).toBe(503);
      expect(res.errors![0]!.extensions!.code).toBe('UPSTREAM_UNAVAILABLE');
      expect(res.errors![0]!.message).toContain(jwks.url);
      expect(res.errors![0]!.message).toContain('"broken"');

      // Over graphql-ws: closed 1013 (try again later), as for a JWKS that cannot be fetched.
      expect((await operationOver('ws', t, token, { query: TYPENAME })).closeCode).toBe(1013);

      // A token of the JWKS's good key is served.
      expect((await t.graphql(TYPENAME, undefined, { key: await sign(good) })).status).toBe(200);

      const lines = t
        .logs()
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as { level: number; msg?: string; jwks?: string; kid?: string });
      const warning = lines.filter((l) => l.level === 40 && l.kid === 'broken');
      expect(warning.length, JSON.stringify(lines)).toBeGreaterThan(0);
      expect(warning[0]!.jwks).toBe(jwks.url);
      expect(lines.filter((l) => l.level >= 50)).toEqual([]);
      expect(t.logs()).not.toContain('unexpected error');
      expect(t.logs()).not.toContain(PASSWORD);
      expect(t.logs()).not.toContain(token.split('.')[2]!);
    },
  );
});
