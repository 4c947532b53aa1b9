// A JWKS URL that holds a password (https://user:password@host/…): the password is never in a log line, in the
// error an app gets while the keys cannot be fetched, or in the checks stored with a mobile-ID result.
import { afterEach, describe, expect, it } from 'vitest';

import { RemoteJwks } from '../../src/mobile-id/jwks.js';
import type { TestGateway } from '../helpers/gateway.js';
import { sign, signingKey, startJwksServer, startJwtGateway, type JwksServer } from '../helpers/jwt.js';

const PASSWORD = 's3cret-jwks-pw';
const withPassword = (url: string) => url.replace('http://', `http://svc:${PASSWORD}@`);

const running: Array<TestGateway | JwksServer> = [];
afterEach(async () => {
  for (const r of running.splice(0).reverse()) await ('stop' in r ? r.stop() : r.close());
});

describe('a JWKS URL with a password', () => {
  it('AUTH_JWKS_URL: neither the answer to an app nor the log repeats it while the keys cannot be fetched', async () => {
    const key = await signingKey('k1');
    const jwks = await startJwksServer([key]);
    running.push(jwks);
    jwks.down();
    const t = await startJwtGateway({ ...jwks, url: withPassword(jwks.url) });
    running.push(t);
    const answer = await t.graphql('{ __typename }', undefined, { key: await sign(key) });
    expect(answer.status).toBe(503);
    expect(JSON.stringify(answer)).toContain('127.0.0.1');
    expect(JSON.stringify(answer)).not.toContain(PASSWORD);
    expect(t.logs()).toContain('could not be fetched');
    expect(t.logs()).not.toContain(PASSWORD);
  });

  it('MOBILEID_JWKS_URL: neither the error nor the log line repeats it', async () => {
    const key = await signingKey('k1');
    const jwks = await startJwksServer([key]);
    running.push(jwks);
    jwks.down();
    const lines: string[] = [];
    const log = (obj: unknown, msg?: string) => lines.push(JSON.stringify([obj, msg]));
    const logger = { warn: log, info: log, error: log, debug: log } as never;
    const remote = new RemoteJwks({ url: withPassword(jwks.url), logger });
    const err = await remote.getKey({ alg: 'ES256', kid: 'k1' }, { payload: '', signature: '' }).then(
      () => null,
      (e: Error) => e,
    );
    expect(err?.message).toContain('could not be fetched');
    expect(err?.message).not.toContain(PASSWORD);
    expect(lines.join('\n')).toContain('127.0.0.1');
    expect(lines.join('\n')).not.toContain(PASSWORD);

    // Keys fetched once, then a kid they lack while the service is down: the error names the URL without it too.
    jwks.up();
    const later = Date.now() + 3_600_000;
    await remote.getKey({ alg: 'ES256', kid: 'k1' }, { payload: '', signature: '' }, later);
    jwks.down();
    const again = await remote
      .getKey({ alg: 'ES256', kid: 'rotated' }, { payload: '', signature: '' }, later + 3_600_000)
      .then(
        () => null,
        (e: Error) => e,
      );
    expect(again?.message).toContain('could not be fetched again');
    expect(again?.message).not.toContain(PASSWORD);
  });
});
