// What GraphQL reads of a stored notification: the authentication it records, its tokens opened when read.
import type { EventRecord } from '../events/index.js';
import type { SecretBox } from '../secret.js';
import {
  notificationContext,
  openAccessToken,
  openIdToken,
  openPersonal,
  type SealedPersonal,
  type StoredMeta,
  type StoredNotification,
} from './stored.js';
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

/** The clear values a notification was sealed from, as the intake that sealed them still holds them. */
export interface ClearParts {
  personal: SealedPersonal | null;
  accessToken: string | null;
  idToken: string | null;
}

/**
 * What is sealed in a stored notification (its tokens, its subject and unknown fields), opened when first read and
 * once: a selection without it never decrypts it. The getters sit on the classes' prototypes, so a view costs no
 * closure and no accessor of its own per delivery (GraphQL reads it through `Object.create`, src/graphql/mobile-id.ts,
 * and the cache is kept on whichever object read it).
 */
class SealedParts {
  private personal: SealedPersonal | undefined;
  private other: Record<string, unknown> | undefined;

  constructor(
    protected readonly stored: StoredNotification,
    protected readonly scope: string | null,
    protected readonly box: SecretBox,
    /** The clear values the intake sealed this payload from, when this process took it in (EventRecord.clear). */
    protected readonly clear: ClearParts | undefined,
  ) {}

  /** Version 1 sealed under the auth_req_id alone; version 2 under its owner too (stored.ts notificationContext). */
  protected context(field: string): string {
    return notificationContext(this.stored.v, this.scope, this.stored.authReqId, field);
  }

  protected opened(): SealedPersonal {
    const clear = this.clear?.personal;
    if (clear) return clear;
    return (this.personal ??= openPersonal(this.box, this.stored, this.scope) ?? { sub: null, fields: {} });
  }

  get otherFields(): Record<string, unknown> {
    if (this.other) return this.other;
    const other: Record<string, unknown> = { ...this.stored.extra, ...this.opened().fields };
    for (const [name, sealed] of Object.entries(this.stored.sealedExtra ?? {}))
      other[name] = JSON.parse(this.box.open(sealed, this.context(`extra:${name}`))) as unknown;
    return (this.other = other);
  }
}

class FailedView extends SealedParts implements MobileIdAuthenticationFailed {
  readonly outcome = 'failure' as const;
  readonly authReqId: string;
  readonly error: string;
  readonly errorDescription: string;
  readonly reason: FailureReason;
  readonly correlationId: string | null;
  readonly requestId: string | null;
  readonly transactionId: string | null;
  readonly receivedAt: Date;

  constructor(event: EventRecord, p: StoredNotification & { outcome: 'failure' }, box: SecretBox) {
    super(p, event.scope, box, event.clear as ClearParts | undefined);
    const meta = event.meta as Partial<StoredMeta>;
    this.authReqId = p.authReqId;
    this.error = p.error;
    this.errorDescription = p.errorDescription;
    this.reason = p.reason;
    this.correlationId = p.correlationId;
    this.requestId = meta.requestId ?? null;
    this.transactionId = meta.transactionId ?? null;
    this.receivedAt = event.receivedAt;
  }
}

class AuthenticatedView extends SealedParts implements MobileIdAuthenticated {
  readonly outcome = 'success' as const;
  readonly authReqId: string;
  readonly correlationId: string | null;
  readonly requestId: string | null;
  readonly transactionId: string | null;
  readonly receivedAt: Date;
  readonly acr: string | null;
  readonly amr: string[] | null;
  readonly issuer: string | null;
  readonly tokenType: string;
  readonly expiresAt: Date;
  readonly idTokenVerified: boolean;
  readonly idTokenChecks: IdTokenChecks;
  readonly jwksUri: string | null;
  readonly leadingKycMatch: boolean | null;
  /** Between expiry and the next purge run the sealed token is still stored; it is not handed out. */
  private readonly accessLive: boolean;
  private access: string | null | undefined;
  private id: string | undefined;

  constructor(event: EventRecord, p: StoredNotification & { outcome: 'success' }, box: SecretBox, now: number) {
    super(p, event.scope, box, event.clear as ClearParts | undefined);
    const meta = event.meta as Partial<StoredMeta>;
    this.authReqId = p.authReqId;
    this.correlationId = p.correlationId;
    this.requestId = meta.requestId ?? null;
    this.transactionId = meta.transactionId ?? null;
    this.receivedAt = event.receivedAt;
    this.acr = p.claims.acr;
    this.amr = p.claims.amr;
    this.issuer = p.claims.iss;
    this.tokenType = p.tokenType;
    this.expiresAt = new Date(p.expiresAt);
    this.idTokenVerified = p.verifiedWith !== null;
    this.idTokenChecks = p.checks
      ? { ...p.checks, notCheckedReason: p.checks.notCheckedReason ?? legacyReason(p.checks) }
      : legacyChecks(p.verifiedWith !== null);
    this.jwksUri = p.jwksUri;
    this.leadingKycMatch = p.leadingKycMatch;
    this.accessLive = p.expiresAt > now;
  }

  /** Version 1 kept the subject in clear; versions 2 to 4 seal it with the unknown fields. */
  get subject(): string | null {
    const p = this.stored as StoredNotification & { outcome: 'success' };
    return p.claims.sub ?? this.opened().sub;
  }

  /** The tokens are opened when first read: a subscriber of its own auth_req_id executes alone (bench scenario 7). */
  get accessToken(): string | null {
    if (this.access === undefined) {
      const p = this.stored as StoredNotification & { outcome: 'success' };
      this.access = !this.accessLive
        ? null
        : (this.clear?.accessToken ?? openAccessToken(this.box, p, this.scope, () => this.opened()));
    }
    return this.access;
  }

  /** Where the stored version keeps it (`openIdToken`), with the sealed parts this view already opened. */
  get idToken(): string {
    if (this.id !== undefined) return this.id;
    const clear = this.clear?.idToken;
    if (clear != null) return (this.id = clear);
    const p = this.stored as StoredNotification & { outcome: 'success' };
    return (this.id = openIdToken(this.box, p, this.scope, () => this.opened()));
  }
}

/** The authentication an event records; what is sealed in it is opened when first read. */
export function authenticationView(event: EventRecord, box: SecretBox, now: number): MobileIdAuthentication {
  const p = event.payload as StoredNotification;
  return p.outcome === 'failure' ? new FailedView(event, p, box) : new AuthenticatedView(event, p, box, now);
}

/** Events stored before the checks were reported were verified in full (every claim required), or not at all. */
function legacyChecks(verified: boolean): IdTokenChecks {
  const r = verified ? 'VALID' : 'NOT_CHECKED';
  return {
    signature: r,
    issuer: r,
    audience: r,
    expiry: r,
    authReqIdClaim: r,
    atHash: r,
    strict: verified,
    notCheckedReason: verified ? null : 'no JWKS was configured: the id_token was only decoded',
  };
}

/** Checks stored before the reason was: NOT_CHECKED then only ever meant that no JWKS was configured. */
function legacyReason(checks: IdTokenChecks): string | null {
  return checks.signature === 'NOT_CHECKED' ? 'no JWKS was configured: the id_token was only decoded' : null;
}
