// A stored success's tokens are found where its version keeps them: the id_token sealed alone (versions 1 and 2) or
// with the subject (versions 3 and 4), the access token sealed alone (versions 1 to 3) or with the subject too
// (version 4); what pending verification opens before it verifies a notification kept while the JWKS was down, and
// what the secrets sweep leaves once the access token has expired.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';

import {
  notificationContext,
  openAccessToken,
  openIdToken,
  openPersonal,
  withoutAccessToken,
  type StoredNotification,
  type StoredSuccess,
} from '../../src/mobile-id/stored.js';
import { SecretBox } from '../../src/secret.js';

const box = new SecretBox(randomBytes(32));
const scope = 'app:shop';
const authReqId = 'versions';

function success(v: 1 | 2 | 3 | 4, sealed: Partial<StoredSuccess>): StoredSuccess {
  return {
    v,
    outcome: 'success',
    authReqId,
    tokenType: 'Bearer',
    accessToken: null,
    expiresIn: 3600,
    expiresAt: 0,
    claims: { sub: null, acr: null, amr: null, iss: null, aud: [], exp: null, iat: null, authReqId: null },
    verifiedWith: null,
    jwksUri: null,
    leadingKycMatch: null,
    correlationId: null,
    extra: {},
    sealedExtra: {},
    ...sealed,
  } as StoredSuccess;
}

describe('the id_token of a stored success, by version', () => {
  it('version 1: sealed alone under the auth_req_id', () => {
    const p = success(1, { idToken: box.seal('v1.id.token', notificationContext(1, scope, authReqId, 'id_token')) });
    expect(openIdToken(box, p, scope)).toBe('v1.id.token');
  });

  it('version 2: sealed alone under its owner', () => {
    const p = success(2, { idToken: box.seal('v2.id.token', notificationContext(2, scope, authReqId, 'id_token')) });
    expect(openIdToken(box, p, scope)).toBe('v2.id.token');
    expect(() => openIdToken(box, p, 'app:crm')).toThrow();
  });

  it('version 3: sealed with the subject, under its owner', () => {
    const personal = JSON.stringify({ sub: 'subject', fields: {}, idToken: 'v3.id.token' });
    const p = success(3, { sealedPersonal: box.seal(personal, notificationContext(3, scope, authReqId, 'personal')) });
    expect(openIdToken(box, p, scope)).toBe('v3.id.token');
    expect(() => openIdToken(box, p, 'app:crm')).toThrow();
  });

  it('version 3 with no id_token sealed is an error, not an empty token', () => {
    const personal = JSON.stringify({ sub: 'subject', fields: {} });
    const p = success(3, { sealedPersonal: box.seal(personal, notificationContext(3, scope, authReqId, 'personal')) });
    expect(() => openIdToken(box, p, scope)).toThrow(/holds no id_token/);
  });
});

describe('the access token of a stored success, by version, and the secrets sweep', () => {
  const personalOf = (v: 3 | 4, value: object) =>
    box.seal(JSON.stringify(value), notificationContext(v, scope, authReqId, 'personal'));

  it('version 3: sealed alone; the sweep sets it to null and leaves the rest as it was', () => {
    const sealedPersonal = personalOf(3, { sub: 'subject', fields: {}, idToken: 'v3.id.token' });
    const p = success(3, {
      accessToken: box.seal('v3-access', notificationContext(3, scope, authReqId, 'access_token')),
      sealedPersonal,
    });
    expect(openAccessToken(box, p, scope)).toBe('v3-access');
    const swept = withoutAccessToken(box, p, scope) as StoredSuccess;
    expect(swept).toEqual({ ...p, accessToken: null });
    expect(openAccessToken(box, swept, scope)).toBeNull();
    expect(openIdToken(box, swept, scope)).toBe('v3.id.token');
    expect(withoutAccessToken(box, swept, scope)).toBe(swept);
  });

  it('version 4: sealed with the subject and the id_token; the sweep seals the rest again without it', () => {
    const p = success(4, {
      sealedPersonal: personalOf(4, {
        sub: 'subject',
        fields: { carrier: 'x' },
        idToken: 'v4.id.token',
        accessToken: 'v4-access',
      }),
    });
    expect(openAccessToken(box, p, scope)).toBe('v4-access');
    expect(openIdToken(box, p, scope)).toBe('v4.id.token');
    expect(() => openAccessToken(box, p, 'app:crm')).toThrow();

    const swept = withoutAccessToken(box, p, scope) as StoredSuccess;
    expect(swept.sealedPersonal).not.toBe(p.sealedPersonal);
    expect({ ...swept, sealedPersonal: p.sealedPersonal }).toEqual(p);
    expect(openPersonal(box, swept, scope)).toEqual({
      sub: 'subject',
      fields: { carrier: 'x' },
      idToken: 'v4.id.token',
    });
    expect(openAccessToken(box, swept, scope)).toBeNull();
    // Swept already: left as it is.
    expect(withoutAccessToken(box, swept, scope)).toBe(swept);
    // Under another owner's context it does not open, so the sweep cannot rewrite it.
    expect(() => withoutAccessToken(box, p, 'app:crm')).toThrow();
  });

  it('a failure is left as it is', () => {
    const failure = {
      v: 4,
      outcome: 'failure',
      authReqId,
      error: 'access_denied',
      errorDescription: 'no',
      reason: 'USER_REFUSED',
      correlationId: null,
      extra: {},
      sealedExtra: {},
      sealedPersonal: personalOf(4, { sub: null, fields: { a: 1 } }),
    } as unknown as StoredNotification;
    expect(withoutAccessToken(box, failure, scope)).toBe(failure);
  });
});
