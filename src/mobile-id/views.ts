// What GraphQL reads of a stored notification: the authentication it records, its tokens opened when read.
import type { EventRecord } from '../events/index.js';
import type { SecretBox } from './sealing.js';
import { notificationContext, type SealedPersonal, type StoredMeta, type StoredNotification } from './stored.js';
import type { IdTokenChecks } from './verify.js';
import type { FailureReason } from './wire.js';

interface MobileIdAuthenticated {
  outcome: 'success';
  authReqId: string;
  subject: string | null;
  acr: string | null;
  amr: string[] | null;
  issuer: string | null;
  /** Null once the token has expired. */
  accessToken: string | null;
  tokenType: string;
  expiresAt: Date;
  idToken: string;
  idTokenVerified: boolean;
  idTokenChecks: IdTokenChecks;
  jwksUri: string | null;
  leadingKycMatch: boolean | null;
  correlationId: string | null;
  requestId: string | null;
  transactionId: string | null;
  receivedAt: Date;
  otherFields: Record<string, unknown>;
}

interface MobileIdAuthenticationFailed {
  outcome: 'failure';
  authReqId: string;
  error: string;
  errorDescription: string;
  reason: FailureReason;
  correlationId: string | null;
  requestId: string | null;
  transactionId: string | null;
  receivedAt: Date;
  otherFields: Record<string, unknown>;
}

export type MobileIdAuthentication = MobileIdAuthenticated | MobileIdAuthenticationFailed;

/** The authentication an event records; its tokens are opened when first read. */
export function authenticationView(event: EventRecord, box: SecretBox): MobileIdAuthentication {
  const p = event.payload as StoredNotification;
  const meta = event.meta as Partial<StoredMeta>;
  // Version 1 sealed under the auth_req_id alone; version 2 under its owner too (stored.ts notificationContext).
  const context = (field: string) => notificationContext(p.v, event.scope, p.authReqId, field);
  let personal: SealedPersonal | undefined;
  const opened = () => (personal ??= p.sealedPersonal ? (JSON.parse(box.open(p.sealedPersonal, context('personal'))) as SealedPersonal) : { sub: null, fields: {} });
  let otherFields: Record<string, unknown> | undefined;
  const other = () => {
    if (otherFields) return otherFields;
    otherFields = { ...p.extra, ...opened().fields };
    for (const [name, sealed] of Object.entries(p.sealedExtra ?? {})) otherFields[name] = JSON.parse(box.open(sealed, context(`extra:${name}`))) as unknown;
    return otherFields;
  };
  const common = {
    authReqId: p.authReqId,
    correlationId: p.correlationId,
    requestId: meta.requestId ?? null,
    transactionId: meta.transactionId ?? null,
    receivedAt: event.receivedAt,
  };
  // What is sealed is opened when first read, once: a selection without it never decrypts it.
  const lazyOther = { otherFields: { enumerable: true, get: other } };
  if (p.outcome === 'failure') {
    const failed = { outcome: 'failure', ...common, error: p.error, errorDescription: p.errorDescription, reason: p.reason } as Omit<MobileIdAuthenticationFailed, 'otherFields'> as MobileIdAuthenticationFailed;
    return Object.defineProperties(failed, lazyOther);
  }
  // Between expiry and the next purge run the sealed token is still stored; it is not handed out.
  const sealedAccess = p.accessToken !== null && p.expiresAt > Date.now() ? p.accessToken : null;
  let accessToken: string | null | undefined;
  let idToken: string | undefined;
  const view = {
    outcome: 'success',
    ...common,
    acr: p.claims.acr,
    amr: p.claims.amr,
    issuer: p.claims.iss,
    tokenType: p.tokenType,
    expiresAt: new Date(p.expiresAt),
    idTokenVerified: p.verifiedWith !== null,
    idTokenChecks: p.checks ? { ...p.checks, notCheckedReason: p.checks.notCheckedReason ?? legacyReason(p.checks) } : legacyChecks(p.verifiedWith !== null),
    jwksUri: p.jwksUri,
    leadingKycMatch: p.leadingKycMatch,
  } as Omit<MobileIdAuthenticated, 'accessToken' | 'idToken' | 'subject' | 'otherFields'> as MobileIdAuthenticated;
  // The tokens are opened (AES-GCM) when first read, once: a selection without them never decrypts them. A
  // subscriber of its own auth_req_id executes alone, so each delivery used to open both (bench scenario 7).
  return Object.defineProperties(view, {
    ...lazyOther,
    // Version 1 kept the subject in clear; version 2 sealed it with the unknown fields.
    subject: { enumerable: true, get: () => p.claims.sub ?? opened().sub },
    accessToken: {
      enumerable: true,
      get: () => (accessToken === undefined ? (accessToken = sealedAccess === null ? null : box.open(sealedAccess, context('access_token'))) : accessToken),
    },
    idToken: { enumerable: true, get: () => (idToken ??= box.open(p.idToken, context('id_token'))) },
  });
}

/** Events stored before the checks were reported were verified in full (every claim required), or not at all. */
function legacyChecks(verified: boolean): IdTokenChecks {
  const r = verified ? 'VALID' : 'NOT_CHECKED';
  return { signature: r, issuer: r, audience: r, expiry: r, authReqIdClaim: r, atHash: r, strict: verified, notCheckedReason: verified ? null : 'no JWKS was configured: the id_token was only decoded' };
}

/** Checks stored before the reason was: NOT_CHECKED then only ever meant that no JWKS was configured. */
function legacyReason(checks: IdTokenChecks): string | null {
  return checks.signature === 'NOT_CHECKED' ? 'no JWKS was configured: the id_token was only decoded' : null;
}
