// A caller without valid credentials learns nothing of which MCP toolsets exist: /mcp/<name> of a toolset that does
// not exist is answered as one that does (401 with its challenge, or the Host check's 403 first), and its protected
// resource metadata is served as a real toolset's; only an authenticated caller is told 404.
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../../helpers/gateway.js';
import { signingKey, startJwksServer, startJwtGateway, type JwksServer } from '../../helpers/jwt.js';

const TOOLSETS = 'support=catalog,projects;internal=*';
const HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
const BODY = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} });

/** One answer, with the toolset's name in it replaced by `<toolset>`. */
async function answer(url: string, toolset: string, init: { method?: string; headers?: Record<string, string> } = {}) {
  const method = init.method ?? 'POST';
  const res = await request(url, {
    method,
    headers: { ...HEADERS, ...init.headers },
    ...(method === 'POST' ? { body: BODY } : {}),
  });
  const blank = (text: string | undefined) => text?.replaceAll(`/${toolset}`, '/<toolset>');
  return {
    status: res.statusCode,
    challenge: blank(res.headers['www-authenticate'] as string | undefined),
    body: blank(await res.body.text()),
  };
}

let keyed: TestGateway;
let jwks: JwksServer;
let jwt: TestGateway;
beforeAll(async () => {
  jwks = await startJwksServer([await signingKey('k1')]);
  [keyed, jwt] = await Promise.all([
    startTestGateway({ GATEWAY_API_KEYS: 'agent:k1', MCP_TOOLSETS: TOOLSETS }),
    startJwtGateway(jwks, { MCP_TOOLSETS: TOOLSETS }),
  ]);
});
afterAll(async () => {
  await Promise.all([keyed?.close(), jwt?.close()]);
  await jwks?.stop();
});

describe('an MCP toolset that does not exist', () => {
  it('is answered without credentials, or with wrong ones, as one that exists; with a valid key it is not found', async () => {
    for (const headers of [{} as Record<string, string>, { authorization: 'Bearer not-a-key' }]) {
      const known = await answer(`${keyed.url}/mcp/support`, 'support', { headers });
      expect(known.status).toBe(401);
      expect(await answer(`${keyed.url}/mcp/nope`, 'nope', { headers })).toEqual(known);
      expect(await answer(`${keyed.url}/mcp/nope`, 'nope', { method: 'GET', headers })).toEqual(
        await answer(`${keyed.url}/mcp/support`, 'support', { method: 'GET', headers }),
      );
    }
    const found = await answer(`${keyed.url}/mcp/nope`, 'nope', { headers: { authorization: 'Bearer k1' } });
    expect(found.status).toBe(404);
  });

  it('is refused by the Host and Origin checks first, as one that exists', async () => {
    for (const headers of [
      { host: 'attacker.example' } as Record<string, string>,
      { origin: 'https://attacker.example' },
    ]) {
      const known = await answer(`${keyed.url}/mcp/support`, 'support', { headers });
      expect(known.status).toBe(403);
      expect(await answer(`${keyed.url}/mcp/nope`, 'nope', { headers })).toEqual(known);
      expect(
        await answer(`${keyed.url}/mcp/nope`, 'nope', { headers: { ...headers, authorization: 'Bearer k1' } }),
      ).toEqual(known);
    }
  });

  it('with AUTH_*, gets the same challenge and the same protected resource metadata as one that exists', async () => {
    for (const headers of [{} as Record<string, string>, { authorization: 'Bearer eyJhbGciOiJFUzI1NiJ9.e30.c2ln' }]) {
      const known = await answer(`${jwt.url}/mcp/support`, 'support', { headers });
      expect(known.status).toBe(401);
      expect(known.challenge).toMatch(/resource_metadata="[^"]+\/mcp\/<toolset>"/);
      expect(await answer(`${jwt.url}/mcp/nope`, 'nope', { headers })).toEqual(known);
    }
    const metadata = (toolset: string) =>
      answer(`${jwt.url}/.well-known/oauth-protected-resource/mcp/${toolset}`, toolset, { method: 'GET' });
    const known = await metadata('support');
    expect(known.status).toBe(200);
    expect(JSON.parse(known.body!).resource).toBe(`${jwt.url}/mcp/<toolset>`);
    expect(await metadata('nope')).toEqual(known);
  });
});
