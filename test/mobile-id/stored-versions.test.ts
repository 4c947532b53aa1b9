// A stored success's id_token is found where its version keeps it: sealed alone (versions 1 and 2) or with the
// subject (version 3); what pending verification opens before it verifies a notification kept while the JWKS was down.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';

import { notificationContext, openIdToken, type StoredSuccess } from '../../src/mobile-id/stored.js';
import { SecretBox } from '../../src/secret.js';

const box = new SecretBox(randomBytes(32));
const scope = 'app:shop';
const authReqId = 'versions';

function success(v: 1 | 2 | 3, sealed: Partial<StoredSuccess>): StoredSuccess {
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
