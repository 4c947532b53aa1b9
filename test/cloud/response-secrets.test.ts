import { describe, expect, it } from 'vitest';

import { scrubResponse } from '../../src/cloud/wire.js';

// The spec shows no cloud response body, so the names an upstream echoes secrets under are unknown: stored answers
// are scrubbed by pattern (*password*, *secret*, *token*, *key*, credentials, an echoed authorization or cookie), at
// any depth and inside arrays.
describe('secrets in stored cloud answers', () => {
  it.each([
    'password',
    'adminPassword',
    'sasl_password',
    'passwd',
    'passphrase',
    'clientSecret',
    'client_secret',
    'secret',
    'access_token',
    'accessToken',
    'refreshToken',
    'iamToken',
    'token',
    'apiKey',
    'api_key',
    'privateKey',
    'credentials',
    // An echo of the request's headers: the gateway's own bearer token, a cookie.
    'authorization',
    'Authorization',
    'proxy-authorization',
    'cookie',
  ])('drops %s wherever it stands', (name) => {
    const body = {
      id: 'vm-1',
      [name]: 'hunter2',
      user: { name: 'ops', [name]: 'hunter2' },
      users: [{ name: 'a', [name]: 'hunter2' }],
    };
    const stored = scrubResponse(body);
    expect(JSON.stringify(stored)).not.toContain('hunter2');
    expect(stored).toEqual({ id: 'vm-1', user: { name: 'ops' }, users: [{ name: 'a' }] });
  });

  it('keeps an answer without secrets as it is, ids, addresses and names included', () => {
    const body = { id: 'ip-1', address: '203.0.113.7', title: 'public', data: { uuid: 'u', passengers: 3 } };
    expect(scrubResponse(body)).toBe(body);
  });
});
