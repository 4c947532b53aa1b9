// MCP with apps that sign in with their identity provider's JWTs (AUTH_*): the protected resource's metadata
// (RFC 9728), 401 with the resource_metadata challenge, and 403 insufficient_scope naming the scope to step up to.
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { TestGateway } from '../../helpers/gateway.js';
import {
  ISSUER,
  sign,
  signingKey,
  startJwksServer,
  startJwtGateway,
  testClock,
  type JwksServer,
  type SigningKey,
} from '../../helpers/jwt.js';
import { mcpClient } from '../../helpers/mcp.js';

let key: SigningKey;
let jwks: JwksServer;
let gw: TestGateway;
beforeAll(async () => {
  key = await signingKey('k1');
  jwks = await startJwksServer([key]);
  gw = await startJwtGateway(jwks, { AUTH_SCOPE_PREFIX: 'gateway:' });
});
afterAll(async () => {
  await gw?.close();
  await jwks?.stop();
});

const HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
const call = (name: string) =>
  JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name, arguments: {} } });

describe('MCP with JWT apps', () => {
  it('serves the protected resource metadata of /mcp (RFC 9728) naming the issuer and the scopes', async () => {
    const res = await request(`${gw.url}/.well-known/oauth-protected-resource/mcp`);
    expect(res.statusCode).toBe(200);
    expect(await res.body.json()).toEqual({
      resource: `${gw.url}/mcp`,
      authorization_servers: [ISSUER],
      scopes_supported: expect.arrayContaining(['gateway:cloud:read', 'gateway:cloud:approve']),
      bearer_methods_supported: ['header'],
      resource_name: expect.any(String),
    });
  });

  it('answers a request without a token 401 with the resource_metadata challenge, and a bad token 401 invalid_token', async () => {
    const missing = await request(`${gw.url}/mcp`, { method: 'POST', headers: HEADERS, body: call('catalog') });
    expect(missing.statusCode).toBe(401);
    expect(missing.headers['www-authenticate']).toBe(
      `Bearer resource_metadata="${gw.url}/.well-known/oauth-protected-resource/mcp"`,
    );
    await missing.body.dump();
    const forged = await sign(await signingKey('k1'), { claims: { azp: 'shop', scope: 'gateway:cloud:read' } });
    const bad = await request(`${gw.url}/mcp`, {
      method: 'POST',
      headers: { ...HEADERS, authorization: `Bearer ${forged}` },
      body: call('catalog'),
    });
    expect(bad.statusCode).toBe(401);
    expect(bad.headers['www-authenticate']).toMatch(
      /^Bearer error="invalid_token", error_description="[^"]+", resource_metadata="/,
    );
    await bad.body.dump();
  });

  it('answers a token whose iss or crit header holds a character above U+00FF 401 with the challenge, like any bad token', async () => {
    const k1 = await signingKey('k1');
    const unicode = (text: string) => Buffer.from(text).toString('base64url');
    const body = unicode(JSON.stringify({ iss: 'https://idp.example/\u4e2d\u6587', aud: 'x', azp: 'shop' }));
    const tokens = [
      await sign(k1, { iss: 'https://idp.example/\u4e2d\u6587' }),
      // A header naming a critical extension the gateway does not know, spelled outside Latin-1.
      `${unicode(JSON.stringify({ alg: 'ES256', kid: 'k1', crit: ['\u2603'], '\u2603': 1 }))}.${body}.c2ln`,
    ];
    for (const token of tokens) {
      const res = await request(`${gw.url}/mcp`, {
        method: 'POST',
        headers: { ...HEADERS, authorization: `Bearer ${token}` },
        body: call('catalog'),
      });
      const text = await res.body.text();
      expect(res.statusCode, text).toBe(401);
      const challenge = String(res.headers['www-authenticate']);
      expect(challenge).toMatch(
        /^Bearer error="invalid_token", error_description="(?:[^"\\]|\\.)+", resource_metadata="/,
      );
      // A header value is Latin-1 at most: what the gateway quotes of the token is printable ASCII.
      expect(challenge).toMatch(/^[\x20-\x7e]+$/);
    }
    expect(gw.logs()).not.toMatch(/"level":50.*Invalid character/);
  });

  it("answers a call of a tool outside the token's scopes 403 insufficient_scope naming the scope, and runs nothing", async () => {
    const token = await sign(key, { claims: { azp: 'reader', scope: 'gateway:mobile-id:read' } });
    const res = await request(`${gw.url}/mcp`, {
      method: 'POST',
      headers: { ...HEADERS, authorization: `Bearer ${token}`, 'mcp-protocol-version': '2025-06-18' },
      body: call('projects'),
    });
    expect(res.statusCode).toBe(403);
    expect(res.headers['www-authenticate']).toBe(
      `Bearer error="insufficient_scope", error_description="the scope gateway:cloud:read is required", scope="gateway:cloud:read", resource_metadata="${gw.url}/.well-known/oauth-protected-resource/mcp"`,
    );
    await res.body.dump();
  });

  it("a JWT app lists and calls the tools its token's scopes allow", async () => {
    const token = await sign(key, { claims: { azp: 'reader', scope: 'gateway:cloud:read' } });
    const c = await mcpClient(gw, { key: token });
    try {
      expect(await c.toolNames()).toEqual(['catalog', 'projects', 'project', 'provisioning', 'wait_for_events']);
      expect((await c.call('projects')).structuredContent).toEqual({ projects: [] });
    } finally {
      await c.close();
    }
  });

  it('a subscriptions/listen stream opened with a JWT ends when the token expires', async () => {
    // The gateway's clock stands still until the test moves it: a token of a few seconds on the wall's clock could
    // expire while a loaded machine still connects, and the listen would be refused instead of ended. The clock is
    // moved to a second before the expiry once the client is connected; the gateway's own timer ends the stream.
    const clock = testClock();
    const clocked = await startJwtGateway(jwks, { AUTH_SCOPE_PREFIX: 'gateway:' }, { testing: { clock: clock.now } });
    const exp = Math.floor(clock.now() / 1000) + 3600;
    const token = await sign(key, {
      claims: { azp: 'listener', scope: 'gateway:mobile-id:read' },
      iat: Math.floor(clock.now() / 1000),
      exp,
    });
    const c = await mcpClient(clocked, { key: token });
    try {
      clock.advance(exp * 1000 - 1000 - clock.now());
      const sub = await c.client.listen({ resourceSubscriptions: ['mobileid://authentications/until-expiry'] });
      expect(await sub.closed).toBe('remote');
    } finally {
      await c.close();
      await clocked.close();
    }
  });
});
