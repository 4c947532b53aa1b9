// How a mobile-ID notification is kept in the event log: its kind, its key (the auth_req_id), its dedupe key
// and the payload, with no token in clear (docs/decisions/005).
import { badUserInput } from '../errors.js';
import type { IdTokenChecks, IdTokenClaims } from './verify.js';
import { MAX_ID_LENGTH, type FailureReason } from './wire.js';

export const MOBILE_ID_EVENT_KIND = 'mobile-id';

/** What the event log holds for a success notification: no token in clear (docs/decisions/005). */
export interface StoredSuccess {
  v: 1;
  outcome: 'success';
  authReqId: string;
  tokenType: 'Bearer';
  /** Sealed; null once its expires_in has passed and the purge removed it. */
  accessToken: string | null;
  /** Sealed. */
  idToken: string;
  expiresIn: number;
  /** Epoch ms: reception plus expires_in. */
  expiresAt: number;
  claims: IdTokenClaims;
  /** The JWKS the id_token was verified against, or null when it was only decoded. */
  verifiedWith: string | null;
  /** What each id_token check found; absent on events stored before the checks were reported. */
  checks?: IdTokenChecks;
  jwksUri: string | null;
  leadingKycMatch: boolean | null;
  correlationId: string | null;
  /** Fields neither body shape names, as sent (credential-like ones in `sealedExtra`). */
  extra: Record<string, unknown>;
  sealedExtra: Record<string, string>;
}

interface StoredFailure {
  v: 1;
  outcome: 'failure';
  authReqId: string;
  error: string;
  errorDescription: string;
  reason: FailureReason;
  correlationId: string | null;
  extra: Record<string, unknown>;
  sealedExtra: Record<string, string>;
}

export type StoredNotification = StoredSuccess | StoredFailure;

export interface StoredMeta {
  /** X-Mobileid-Request-Id and X-Mobileid-Transaction-Id: the sender's references for technical support. */
  requestId: string | null;
  transactionId: string | null;
  contentType: string;
  /** The gateway's own request id of the delivery (its log lines carry it). */
  gatewayRequestId: string;
}

/**
 * The dedupe key of a notification: per owner of the token that carried it. A shared (configured, unbound)
 * token keeps the key it always had, so a repeat of a notification stored before owners were told apart is
 * still recognised.
 */
export function mobileIdDedupeKey(scope: string | null, authReqId: string): string {
  return scope === null ? `${MOBILE_ID_EVENT_KIND}:${authReqId}` : `${MOBILE_ID_EVENT_KIND}@${scope}:${authReqId}`;
}

/** BAD_USER_INPUT for an authReqId argument that no notification can carry. */
export function checkAuthReqId(authReqId: string): void {
  if (authReqId.length === 0 || authReqId.length > MAX_ID_LENGTH) throw badUserInput('authReqId', `must be 1 to ${MAX_ID_LENGTH} characters`);
}
