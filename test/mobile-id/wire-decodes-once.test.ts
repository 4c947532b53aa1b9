// The notification's id_token is decoded once, by the body check, and handed to the intake with the notification
// (no module-level memo of the last token): bad fields are still named in the shape's order.
import { describe, expect, it } from 'vitest';

import { isCompactJwe, parseNotification } from '../../src/mobile-id/wire.js';

const b64 = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
const JWE_HEADER = b64({ alg: 'dir', enc: 'A256GCM' });
const jwt = (claims: object) => `${b64({ alg: 'RS256', kid: 'k' })}.${b64(claims)}.sig`;
const body = (overrides: Record<string, unknown>) => ({
  auth_req_id: 'a-1',
  access_token: 'at',
  token_type: 'Bearer',
  id_token: jwt({ sub: 'user-1' }),
  expires_in: 60,
  ...overrides,
});

describe('parseNotification', () => {
  it('hands the decoded id_token with the notification, each notification its own', () => {
    const one = parseNotification(body({ id_token: jwt({ sub: 'user-1' }) }));
    const two = parseNotification(body({ id_token: jwt({ sub: 'user-2' }) }));
    expect(one.ok && one.notification.outcome === 'success' && one.notification.idToken?.claims.sub).toBe('user-1');
    expect(two.ok && two.notification.outcome === 'success' && two.notification.idToken?.claims.sub).toBe('user-2');
  });

  it('hands no claims for an encrypted id_token (JWE), which stays sealed', () => {
    const sealed = parseNotification(body({ id_token: `${JWE_HEADER}..bbb.ccc.ddd` }));
    expect(sealed.ok && sealed.notification.outcome === 'success' && sealed.notification.idToken).toBeNull();
  });

  it('tells a JWE by its five base64url parts and a header that names alg and enc, whatever the count of dots', () => {
    expect(isCompactJwe(`${JWE_HEADER}..bbb.ccc.ddd`)).toBe(true);
    expect(isCompactJwe(`${JWE_HEADER}.kkk.bbb.ccc.ddd`)).toBe(true);
    for (const token of [
      'aaa..bbb.ccc.ddd',
      `${b64({ alg: 'dir' })}..bbb.ccc.ddd`,
      `${b64({ enc: 'A256GCM' })}..bbb.ccc.ddd`,
      `${b64({ alg: 'dir', enc: 1 })}..bbb.ccc.ddd`,
      jwt({ sub: 'user-1' }),
      '',
      'a.b',
      'aaa.kkk.bbb.ccc',
      'aaa.kkk.bbb.ccc.ddd.eee',
      'aaa.kkk..ccc.ddd',
      '.kkk.bbb.ccc.ddd',
      'aaa.kkk.bbb.ccc.',
      'aa+.kkk.bbb.ccc.ddd',
      '....',
    ])
      expect(isCompactJwe(token)).toBe(false);
  });

  it('names a malformed id_token and a subject-less one in the shape’s field order, among the other bad fields', () => {
    const bad = parseNotification(body({ token_type: 'Basic', id_token: 'not-a-jwt', expires_in: -1 }));
    expect(bad).toEqual({
      ok: false,
      description: expect.stringMatching(
        /^token_type must be "Bearer".*; id_token is neither a well-formed JWT.*; expires_in must not be negative$/,
      ),
    });
    const noSub = parseNotification(body({ id_token: jwt({ iss: 'x' }) }));
    expect(noSub).toEqual({ ok: false, description: 'id_token has no sub claim (the identifier of the number owner)' });
  });

  it('refuses a sub claim that is a number JSON rounds (beyond 2^53 - 1): two owners would read as one', () => {
    const raw = Buffer.from('{"sub":12345678901234567890}').toString('base64url');
    const rounded = parseNotification(body({ id_token: `${b64({ alg: 'RS256', kid: 'k' })}.${raw}.sig` }));
    expect(rounded).toEqual({
      ok: false,
      description: expect.stringMatching(/^id_token has a sub claim that is a number/),
    });
    const fine = parseNotification(body({ id_token: jwt({ sub: 380501234567 }) }));
    expect(fine.ok).toBe(true);
  });
});
