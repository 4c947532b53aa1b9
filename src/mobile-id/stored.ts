// How a mobile-ID notification is kept in the event log: its kind, its key (the auth_req_id), its dedupe key
// and the payload, with no token in clear (docs/decisions/005).
import { badUserInput } from '../errors.js';
import { EVENT_KINDS } from '../events/kinds.js';
import { sealingContext, type SecretBox } from '../secret.js';
import type { IdTokenChecks, IdTokenClaims } from './verify.js';
import { MAX_ID_LENGTH, type FailureReason } from './wire.js';

export const MOBILE_ID_EVENT_KIND = EVENT_KINDS.mobileId;

/**
 * Unknown body fields kept per notification, in characters of their JSON: past it, the fields that do not fit are
 * dropped (counted in `droppedExtra`, the metric and the log), so a sender's extension cannot fill the database.
 */
export const MAX_EXTRA_FIELDS_CHARS = 4096;

/**
 * The version of a stored notification. 1: `extra` in clear (credential-like fields sealed one by one), `claims.sub`
 * in clear, sealed under `<auth_req_id>\0<field>`. 2: the subject and every kept unknown field sealed, every value
 * sealed under a context that names its owner (`notificationContext`; docs/decisions/050). 3: as 2, with a success's
 * id_token sealed in `sealedPersonal` beside the subject (one seal for what never expires; the access token, which
 * the secrets sweep removes, keeps its own; docs/decisions/072). 4: as 3, with a success's access token sealed there too,
 * until the secrets sweep seals the rest again without it (one seal per notification; docs/decisions/152). All four are
 * read.
 */
export type StoredVersion = 1 | 2 | 3 | 4;

/** The associated data a field of a stored notification is sealed under, by the version it was stored with. */
export function notificationContext(v: StoredVersion, scope: string | null, authReqId: string, field: string): string {
  return v === 1 ? `${authReqId}\u0000${field}` : sealingContext('mobile-id', scope, authReqId, field);
}

/** What the event log holds for a success notification: no token in clear (docs/decisions/005). */
export interface StoredSuccess {
  v: StoredVersion;
  outcome: 'success';
  authReqId: string;
  tokenType: 'Bearer';
  /** v1–v3: sealed, null once its expires_in has passed and the purge removed it; v4: null (in `sealedPersonal`). */
  accessToken: string | null;
  /** v1 and v2: sealed; v3: absent (sealed in `sealedPersonal`). */
  idToken?: string;
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
  /** v1: fields neither body shape names, as sent (credential-like ones in `sealedExtra`); v2: empty. */
  extra: Record<string, unknown>;
  /** v1: credential-like unknown fields, each sealed; v2: empty. */
  sealedExtra: Record<string, string>;
  /**
   * v2: the id_token's `sub` (claims.sub is then null) and the kept unknown fields, one sealed `SealedPersonal`; v3:
   * the id_token with them; v4: the access token too, until the secrets sweep.
   */
  sealedPersonal?: string | null;
  /** v2: unknown fields dropped for MAX_EXTRA_FIELDS_CHARS: how many, and their characters. */
  droppedExtra?: { fields: number; chars: number } | null;
}

interface StoredFailure {
  v: StoredVersion;
  outcome: 'failure';
  authReqId: string;
  error: string;
  errorDescription: string;
  reason: FailureReason;
  correlationId: string | null;
  extra: Record<string, unknown>;
  sealedExtra: Record<string, string>;
  sealedPersonal?: string | null;
  droppedExtra?: { fields: number; chars: number } | null;
}

export type StoredNotification = StoredSuccess | StoredFailure;

/**
 * What `sealedPersonal` opens to: the subject of a success (null for a failure, or an encrypted id_token), the kept
 * unknown fields, from version 3 on a success's id_token, and in version 4 its access token until the secrets sweep.
 */
export interface SealedPersonal {
  sub: string | null;
  fields: Record<string, unknown>;
  idToken?: string;
  accessToken?: string;
}

/** The associated data `sealedPersonal` is sealed under. */
function personalContext(p: StoredNotification, scope: string | null): string {
  return notificationContext(p.v, scope, p.authReqId, 'personal');
}

/** A stored notification's `sealedPersonal`, opened (null when it has none). */
export function openPersonal(box: SecretBox, p: StoredNotification, scope: string | null): SealedPersonal | null {
  return p.sealedPersonal
    ? (JSON.parse(box.open(p.sealedPersonal, personalContext(p, scope))) as SealedPersonal)
    : null;
}

/**
 * A stored success's id_token, opened from where its version keeps it: versions 1 and 2 seal it alone, versions 3 and
 * 4 with the subject in `sealedPersonal`. `personal` opens that (a view passes the one it already opened for the
 * subject).
 */
export function openIdToken(
  box: SecretBox,
  p: StoredSuccess,
  scope: string | null,
  personal: () => SealedPersonal | null = () => openPersonal(box, p, scope),
): string {
  if (p.idToken !== undefined) return box.open(p.idToken, notificationContext(p.v, scope, p.authReqId, 'id_token'));
  const idToken = personal()?.idToken;
  if (typeof idToken !== 'string') throw new Error(`stored notification ${p.authReqId} holds no id_token`);
  return idToken;
}

/**
 * A stored success's access token, opened from where its version keeps it (null once the secrets sweep removed it):
 * versions 1 to 3 seal it alone, version 4 in `sealedPersonal` (`personal` opens that, as for `openIdToken`).
 */
export function openAccessToken(
  box: SecretBox,
  p: StoredSuccess,
  scope: string | null,
  personal: () => SealedPersonal | null = () => openPersonal(box, p, scope),
): string | null {
  if (p.v < 4)
    return p.accessToken === null
      ? null
      : box.open(p.accessToken, notificationContext(p.v, scope, p.authReqId, 'access_token'));
  return personal()?.accessToken ?? null;
}

/**
 * A stored notification as the secrets sweep leaves it once its access token has expired: without the token, the rest
 * as it was. Version 4 keeps the token in `sealedPersonal`, so that is opened and sealed again without it (a fresh IV,
 * the same context); a failure, or a success already without it, is returned as it is.
 */
export function withoutAccessToken(box: SecretBox, p: StoredNotification, scope: string | null): StoredNotification {
  if (p.outcome !== 'success') return p;
  if (p.v < 4) return p.accessToken === null ? p : { ...p, accessToken: null };
  const personal = openPersonal(box, p, scope);
  if (personal === null || personal.accessToken === undefined) return p;
  const { accessToken: _removed, ...rest } = personal;
  return { ...p, sealedPersonal: box.seal(JSON.stringify(rest), personalContext(p, scope)) };
}

export interface StoredMeta {
  /** X-Mobileid-Request-Id and X-Mobileid-Transaction-Id: the sender's references for technical support. */
  requestId: string | null;
  transactionId: string | null;
  contentType: string;
  /** The gateway's own request id of the delivery (its log lines carry it). */
  gatewayRequestId: string;
}

/** BAD_USER_INPUT for an authReqId argument that no notification can carry. */
export function checkAuthReqId(authReqId: string): void {
  if (authReqId.length === 0 || authReqId.length > MAX_ID_LENGTH)
    throw badUserInput('authReqId', `must be 1 to ${MAX_ID_LENGTH} characters`);
}
