import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

import { addressFromResponse, extractCreatedId, parseTokenResponse, scrubResponse } from '../../src/cloud/wire.js';
import { retryAfterMs } from '../../src/upstream/http.js';

describe('reading what the cloud API answers', () => {
  it('takes the created id from id, serviceId, data.id or metadata.id', () => {
    expect(extractCreatedId({ id: 'a' })).toBe('a');
    expect(extractCreatedId({ serviceId: 'b', status: 'CREATING' })).toBe('b');
    expect(extractCreatedId({ data: { id: 'c' } })).toBe('c');
    expect(extractCreatedId({ metadata: { id: 'd', title: 't' } })).toBe('d');
    expect(extractCreatedId({ id: 42 })).toBe('42');
    expect(extractCreatedId({ id: 'first', data: { id: 'second' } })).toBe('first');
  });

  it('finds no id in an answer without one', () => {
    expect(extractCreatedId(null)).toBeNull();
    expect(extractCreatedId('created')).toBeNull();
    expect(extractCreatedId({ status: 'ok' })).toBeNull();
    expect(extractCreatedId({ id: '' })).toBeNull();
  });

  it('reads the token under the common names, with its lifetime', () => {
    const now = 1_000_000;
    expect(parseTokenResponse({ access_token: 't1', expires_in: 60 }, now)).toEqual({
      token: 't1',
      expiresAt: now + 60_000,
    });
    expect(parseTokenResponse({ accessToken: 't2', expiresIn: '30' }, now)).toEqual({
      token: 't2',
      expiresAt: now + 30_000,
    });
    expect(parseTokenResponse({ token: 't3' }, now)).toEqual({ token: 't3', expiresAt: null });
    expect(parseTokenResponse({ data: { access_token: 't4', expires_at: 2000 } }, now)).toEqual({
      token: 't4',
      expiresAt: 2_000_000,
    });
    const jwt = ['e30', Buffer.from(JSON.stringify({ exp: 5000 })).toString('base64url'), 'sig'].join('.');
    expect(parseTokenResponse({ id_token: jwt }, now)).toEqual({ token: jwt, expiresAt: 5_000_000 });
    expect(parseTokenResponse({ nothing: true }, now)).toBeNull();
    // A guess that holds no token does not hide a later one.
    expect(parseTokenResponse({ access_token: null, token: 't5' }, now)).toEqual({ token: 't5', expiresAt: null });
    expect(parseTokenResponse({ access_token: '', accessToken: { v: 1 }, id_token: 't6' }, now)).toEqual({
      token: 't6',
      expiresAt: null,
    });
    expect(parseTokenResponse({ access_token: 7, data: { token: 't7' } }, now)).toEqual({
      token: 't7',
      expiresAt: null,
    });
    expect(parseTokenResponse({ access_token: null }, now)).toBeNull();
  });

  it('finds the IPv4 address of an IP response under the common names, names the field, and finds nothing that is not an address', () => {
    expect(addressFromResponse({ id: 'x', address: '203.0.113.5' })).toEqual({
      address: '203.0.113.5',
      field: 'address',
    });
    expect(addressFromResponse({ data: { ip_address: '198.51.100.7' } })).toEqual({
      address: '198.51.100.7',
      field: 'data.ip_address',
    });
    expect(addressFromResponse({ status: { ip: '192.0.2.1' } })).toEqual({ address: '192.0.2.1', field: 'status.ip' });
    expect(addressFromResponse({ publicIp: '192.0.2.9' })).toEqual({ address: '192.0.2.9', field: 'publicIp' });
    expect(addressFromResponse({ address: 'pending' })).toBeNull();
    expect(addressFromResponse(null)).toBeNull();
  });

  it('removes echoed secrets before a response is stored', () => {
    expect(scrubResponse({ id: 'x', spec: { users: [{ name: 'a', password: 'p' }] }, token: 't' })).toEqual({
      id: 'x',
      spec: { users: [{ name: 'a' }] },
    });
  });

  it('removes every secret key at any depth of any JSON answer, and keeps everything else', () => {
    // Names are matched by pattern (test/cloud/response-secrets.test.ts lists the names it must catch).
    const secret = /passw(or)?d|passphrase|pwd|secret|token|key|credential/i;
    const key = fc.oneof(
      fc.string(),
      fc.constantFrom(
        'password',
        'PASSWORD',
        'adminPassword',
        'access_token',
        'accessToken',
        'token',
        'Secret',
        'tokens',
        'apiKey',
        'id',
        'name',
      ),
    );
    const { json } = fc.letrec((tie) => ({
      json: fc.oneof(
        { depthSize: 'small' },
        fc.string(),
        fc.integer(),
        fc.boolean(),
        fc.constant(null),
        fc.array(tie('json')),
        fc.dictionary(key, tie('json')),
      ),
    }));
    fc.assert(
      fc.property(json, (body) => {
        const text = JSON.stringify(body);
        const expected = JSON.parse(
          JSON.stringify(body, (k, v: unknown) => (secret.test(k) ? undefined : v)),
        ) as unknown;
        expect(scrubResponse(JSON.parse(text))).toEqual(expected);
      }),
      { numRuns: 2000 },
    );
  });

  it('reads Retry-After as seconds or as an HTTP date', () => {
    expect(retryAfterMs('2')).toBe(2000);
    expect(retryAfterMs(new Date(Date.UTC(2030, 0, 1, 0, 0, 10)).toUTCString(), Date.UTC(2030, 0, 1))).toBe(10_000);
    expect(retryAfterMs('soon')).toBeUndefined();
    expect(retryAfterMs(undefined)).toBeUndefined();
  });
});
