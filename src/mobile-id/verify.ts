// The id_token of a success notification: its claims, and its verification per OpenID CIBA Core §10.3.1
// (signature, iss, aud, exp as in OpenID Connect Core §3.1.3.7, plus the auth_req_id claim and at_hash),
// tolerant of absent optional claims unless strict (docs/decisions/016-id-token-checks-and-quarantine.md).
import { createHash } from 'node:crypto';
import { createLocalJWKSet, errors, jwtVerify, type FlattenedJWSInput, type JWSHeaderParameters } from 'jose';

import { ASYMMETRIC_ALGORITHMS, readJwksFile } from '../auth/jwks-fetch.js';
import { INTERNAL_ERROR_MESSAGE, shownUrl } from '../errors.js';
import { logUnexpected, type Logger } from '../logger.js';
import { JwksUnavailableError, RemoteJwks } from './jwks.js';
import { isCompactJwe } from './wire.js';

const AUTH_REQ_ID_CLAIM = 'urn:openid:params:jwt:claim:auth_req_id';

/** Skew allowed between the sender's clock and ours for exp, iat and nbf. */
const CLOCK_TOLERANCE_SECONDS = 30;

export interface IdTokenClaims {
  /** Null when the id_token is encrypted (JWE): its claims cannot be read. */
  sub: string | null;
  acr: string | null;
  amr: string[] | null;
  iss: string | null;
  aud: string[];
  /** Epoch seconds. */
  exp: number | null;
  iat: number | null;
  /** The `urn:openid:params:jwt:claim:auth_req_id` claim. */
  authReqId: string | null;
}

/** The claims of an encrypted id_token (JWE): none can be read without the relying party's decryption key. */
export const NO_CLAIMS: IdTokenClaims = {
  sub: null,
  acr: null,
  amr: null,
  iss: null,
  aud: [],
  exp: null,
  iat: null,
  authReqId: null,
};

const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);
const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);

/** The claims the gateway keeps, from a decoded claims set (wire.ts has checked that sub is a string or a number). */
export function claimsOf(raw: Record<string, unknown>): IdTokenClaims {
  const amr = Array.isArray(raw.amr)
    ? raw.amr.filter((v): v is string => typeof v === 'string')
    : typeof raw.amr === 'string'
      ? [raw.amr]
      : null;
  const aud = Array.isArray(raw.aud)
    ? raw.aud.filter((v): v is string => typeof v === 'string')
    : typeof raw.aud === 'string'
      ? [raw.aud]
      : [];
  return {
    sub: String(raw.sub),
    acr: typeof raw.acr === 'number' ? String(raw.acr) : str(raw.acr),
    amr,
    iss: str(raw.iss),
    aud,
    exp: num(raw.exp),
    iat: num(raw.iat),
    authReqId:
      typeof raw[AUTH_REQ_ID_CLAIM] === 'number' ? String(raw[AUTH_REQ_ID_CLAIM]) : str(raw[AUTH_REQ_ID_CLAIM]),
  };
}

/**
 * at_hash (OpenID Connect Core §3.3.2.11): base64url of the left half of the hash of the access token, the
 * hash being the one of the id_token's alg (SHA-256 for *256, ...; SHA-512 for EdDSA/Ed25519). Null for an
 * alg with no known hash.
 */
function atHash(accessToken: string, alg: string): string | null {
  const hash = /256$/.test(alg)
    ? 'sha256'
    : /384$/.test(alg)
      ? 'sha384'
      : /512$/.test(alg) || alg === 'EdDSA' || alg === 'Ed25519'
        ? 'sha512'
        : null;
  if (!hash) return null;
  const digest = createHash(hash).update(accessToken, 'ascii').digest();
  return digest.subarray(0, digest.length / 2).toString('base64url');
}

/** The outcome of one id_token check: passed, claim absent (allowed unless strict), or not run (no JWKS). */
type CheckResult = 'VALID' | 'ABSENT' | 'NOT_CHECKED';

/**
 * What was checked on an accepted id_token, so that an app can decide for itself (docs/decisions/016). A
 * failed check never gets here: the notification is refused.
 */
export interface IdTokenChecks {
  signature: CheckResult;
  issuer: CheckResult;
  audience: CheckResult;
  /** `exp`: VALID when present and not passed; ABSENT when the token has none. */
  expiry: CheckResult;
  /** The CIBA `urn:openid:params:jwt:claim:auth_req_id` claim equals the body's auth_req_id. */
  authReqIdClaim: CheckResult;
  /** `at_hash` covers the body's access_token. */
  atHash: CheckResult;
  /** Strict mode (MOBILEID_STRICT_ID_TOKEN) was on: every claim above was required. */
  strict: boolean;
  /** Why a check above is NOT_CHECKED; null when every check ran. */
  notCheckedReason: string | null;
}

/** Why an id_token was refused: one value per check (the quarantine and the metric use it). */
export type IdTokenRejection =
  | 'ID_TOKEN_SIGNATURE'
  | 'ID_TOKEN_ISSUER'
  | 'ID_TOKEN_AUDIENCE'
  | 'ID_TOKEN_EXPIRY'
  | 'ID_TOKEN_AUTH_REQ_ID'
  | 'ID_TOKEN_AT_HASH'
  | 'ID_TOKEN_INVALID';

export type VerifyOutcome =
  /** Accepted: `keys` says against which JWKS (null when none is configured), `checks` what each check found. */
  | { status: 'accepted'; keys: string | null; checks: IdTokenChecks }
  /**
   * A check failed: the notification is refused with 400. `unknownKey`: no key of the JWKS has the token's kid,
   * which a rotation not yet published (or a JWKS refetch still cooling down) also looks like.
   */
  | { status: 'rejected'; reason: IdTokenRejection; description: string; unknownKey?: true }
  /** The keys could not be fetched: the gateway, not the sender, is at fault (503). */
  | { status: 'unavailable'; description: string };

/** A key lookup as jose calls it, plus the time (epoch ms) a fetched JWKS's retry schedule counts on. */
type KeyLookup = (header: JWSHeaderParameters, token: FlattenedJWSInput, now?: number) => Promise<CryptoKey>;

export interface VerifierOptions {
  /**
   * The configured JWKS (MOBILEID_JWKS_URL or MOBILEID_JWKS_FILE, or the sandbox's); null when none is. `fetched`:
   * a URL, re-fetched on an unknown kid, so a kid it lacks may only not be published yet.
   */
  keys: { source: string; get: KeyLookup; fetched?: boolean; reload?: () => () => void } | null;
  /** MOBILEID_ISSUER: when set, a present iss must equal it; when unset, iss is reported NOT_CHECKED. */
  issuer: string | undefined;
  /** MOBILEID_CLIENT_ID: when set, a present aud must contain it; when unset, aud is reported NOT_CHECKED. */
  clientId: string | undefined;
  /** MOBILEID_STRICT_ID_TOKEN: iss, aud, exp, the auth_req_id claim and at_hash are required (OpenID CIBA Core §10.3.1). */
  strict?: boolean;
  /**
   * Where an unexpected error of a check (neither jose's nor the JWKS's) is logged in full; its outcome says none of
   * its words. Default: not logged.
   */
  logger?: Logger | undefined;
}

/**
 * The description of a check that failed on an unexpected error: the gateway's side, kept pending like a JWKS that is
 * down, with no word of the error's own (docs/contract.md, Error codes); the error goes to the log.
 */
const UNEXPECTED_DESCRIPTION = `the id_token could not be verified: ${INTERNAL_ERROR_MESSAGE}`;

/**
 * A JWKS from MOBILEID_JWKS_URL (fetched, cached, re-fetched on an unknown kid, and while it is down tried again on
 * one backoff schedule: src/mobile-id/jwks.ts) or MOBILEID_JWKS_FILE (read at start; `reload` reads it again and
 * returns the swap, or throws a ConfigError naming the variable, the file and the line: src/auth/jwks-fetch.ts
 * readJwksFile). The file's keys passed over are logged when its keys come into force: at start, and by the swap.
 */
export function configuredKeys(
  options: { jwksUrl?: string | undefined; jwksFile?: string | undefined },
  deps: { logger?: Logger; onFetch?: (outcome: 'ok' | 'failed') => void } = {},
): VerifierOptions['keys'] {
  if (options.jwksFile) {
    const file = options.jwksFile;
    const read = readJwksFile('MOBILEID_JWKS_FILE', file);
    read.warn(deps.logger);
    // Read again by each reload (docs/decisions/057): a check in flight keeps the key set it looked its key up in.
    let get = createLocalJWKSet(read.jwks);
    return {
      source: file,
      get: (header, token) => get(header, token),
      reload: () => {
        const again = readJwksFile('MOBILEID_JWKS_FILE', file);
        const next = createLocalJWKSet(again.jwks);
        return () => {
          get = next;
          again.warn(deps.logger);
        };
      },
    };
  }
  if (options.jwksUrl) {
    const remote = new RemoteJwks({ url: options.jwksUrl, logger: deps.logger, onFetch: deps.onFetch });
    return {
      source: shownUrl(options.jwksUrl),
      get: (header, token, now) => remote.getKey(header, token, now),
      fetched: true,
    };
  }
  return null;
}

function notChecked(reason: string): IdTokenChecks {
  return {
    signature: 'NOT_CHECKED',
    issuer: 'NOT_CHECKED',
    audience: 'NOT_CHECKED',
    expiry: 'NOT_CHECKED',
    authReqIdClaim: 'NOT_CHECKED',
    atHash: 'NOT_CHECKED',
    strict: false,
    notCheckedReason: reason,
  };
}

/**
 * Verifies id_tokens against the configured JWKS only. A `jwks_uri` in a notification body is the
 * operator's key for encrypting kyc-match requests (spec, "Body, positive scenario"), not a signing key: it
 * is never used here.
 *
 * The spec promises only `sub` and the authentication context, and the sender does not retry, so outside
 * strict mode a claim that is absent is reported (ABSENT), not refused; a claim that is present and wrong is
 * always refused. With a JWKS the signature is always checked; iss and aud are compared when the token carries
 * them and MOBILEID_ISSUER / MOBILEID_CLIENT_ID say what to expect (docs/decisions/039).
 */
export class IdTokenVerifier {
  constructor(private readonly options: VerifierOptions) {}

  get strict(): boolean {
    return this.options.strict ?? false;
  }

  /**
   * `at` (epoch ms, default now): the time exp and nbf are judged at; a deferred check passes the reception time.
   * `now` (epoch ms, default now): the time a fetched JWKS's retry schedule counts on.
   */
  async check(input: {
    idToken: string;
    accessToken: string;
    authReqId: string;
    at?: number;
    now?: number;
  }): Promise<VerifyOutcome> {
    const keys = this.options.keys;
    const strict = this.strict;
    if (isCompactJwe(input.idToken)) {
      if (strict)
        return {
          status: 'rejected',
          reason: 'ID_TOKEN_INVALID',
          description:
            'id_token is encrypted (JWE): the gateway holds no key to decrypt it, and strict mode requires every check',
        };
      return {
        status: 'accepted',
        keys: null,
        checks: notChecked('the id_token is encrypted (JWE) and the gateway holds no key to decrypt it'),
      };
    }
    if (!keys)
      return {
        status: 'accepted',
        keys: null,
        checks: notChecked(
          'no JWKS is configured (MOBILEID_JWKS_URL or MOBILEID_JWKS_FILE): the id_token was only decoded',
        ),
      };

    let alg: string;
    let payload: Record<string, unknown>;
    try {
      const now = input.now;
      const getKey: KeyLookup =
        now === undefined || !keys.fetched ? keys.get : (header, token) => keys.get(header, token, now);
      const result = await jwtVerify(input.idToken, getKey, {
        algorithms: ASYMMETRIC_ALGORITHMS,
        requiredClaims: strict ? ['iss', 'aud', 'exp', 'sub'] : ['sub'],
        clockTolerance: CLOCK_TOLERANCE_SECONDS,
        ...(input.at === undefined ? {} : { currentDate: new Date(input.at) }),
      });
      alg = result.protectedHeader.alg;
      payload = result.payload as Record<string, unknown>;
    } catch (err) {
      const outcome = describeJoseError(err);
      if (outcome === null) {
        if (this.options.logger)
          logUnexpected(
            this.options.logger,
            err,
            { authReqId: input.authReqId },
            'unexpected error while a mobile-ID id_token was verified: it is kept pending verification',
          );
        return { status: 'unavailable', description: UNEXPECTED_DESCRIPTION };
      }
      // A file is read once: a kid it lacks will never appear, so only a fetched JWKS leaves room for a rotation.
      if (outcome.status === 'rejected' && outcome.unknownKey && !keys.fetched) delete outcome.unknownKey;
      return outcome;
    }
    const unchecked: string[] = [];
    let issuer: CheckResult = 'ABSENT';
    if (payload.iss !== undefined) {
      if (this.options.issuer === undefined) {
        issuer = 'NOT_CHECKED';
        unchecked.push('MOBILEID_ISSUER is not set, so iss was not compared');
      } else if (payload.iss !== this.options.issuer) {
        return {
          status: 'rejected',
          reason: 'ID_TOKEN_ISSUER',
          description: 'id_token iss claim: does not equal MOBILEID_ISSUER',
        };
      } else issuer = 'VALID';
    }
    let audience: CheckResult = 'ABSENT';
    if (payload.aud !== undefined) {
      if (this.options.clientId === undefined) {
        audience = 'NOT_CHECKED';
        unchecked.push('MOBILEID_CLIENT_ID is not set, so aud was not compared');
      } else if (!audiences(payload.aud).includes(this.options.clientId)) {
        return {
          status: 'rejected',
          reason: 'ID_TOKEN_AUDIENCE',
          description: 'id_token aud claim: does not contain MOBILEID_CLIENT_ID',
        };
      } else audience = 'VALID';
    }
    const claims = claimsOf(payload);
    // OpenID CIBA Core §10.3.1: the id_token is bound to this authentication request and access token.
    let authReqIdClaim: CheckResult = 'VALID';
    if (payload[AUTH_REQ_ID_CLAIM] === undefined) {
      if (strict)
        return {
          status: 'rejected',
          reason: 'ID_TOKEN_AUTH_REQ_ID',
          description: `id_token has no ${AUTH_REQ_ID_CLAIM} claim (required in strict mode)`,
        };
      authReqIdClaim = 'ABSENT';
    } else if (claims.authReqId !== input.authReqId) {
      return {
        status: 'rejected',
        reason: 'ID_TOKEN_AUTH_REQ_ID',
        description: `id_token's ${AUTH_REQ_ID_CLAIM} claim does not equal the body's auth_req_id`,
      };
    }
    let atHashResult: CheckResult = 'VALID';
    if (payload.at_hash === undefined) {
      if (strict)
        return {
          status: 'rejected',
          reason: 'ID_TOKEN_AT_HASH',
          description: 'id_token has no at_hash claim (required in strict mode)',
        };
      atHashResult = 'ABSENT';
    } else {
      const expected = atHash(input.accessToken, alg);
      if (expected === null || payload.at_hash !== expected) {
        return {
          status: 'rejected',
          reason: 'ID_TOKEN_AT_HASH',
          description: "id_token's at_hash does not match the access_token",
        };
      }
    }
    return {
      status: 'accepted',
      keys: keys.source,
      checks: {
        signature: 'VALID',
        issuer,
        audience,
        expiry: payload.exp === undefined ? 'ABSENT' : 'VALID',
        authReqIdClaim,
        atHash: atHashResult,
        strict,
        notCheckedReason: unchecked.length ? unchecked.join('; ') : null,
      },
    };
  }
}

function audiences(aud: unknown): string[] {
  return Array.isArray(aud)
    ? aud.filter((v): v is string => typeof v === 'string')
    : typeof aud === 'string'
      ? [aud]
      : [];
}

/**
 * What a failed jwtVerify says: the token's fault (rejected) or the keys' (unavailable), for every error jose's
 * jwtVerify and a createLocalJWKSet lookup throw; null for any other error (a bug's, a driver's), which the caller
 * masks and logs.
 */
function describeJoseError(err: unknown): VerifyOutcome | null {
  const reject = (reason: IdTokenRejection, description: string): VerifyOutcome => ({
    status: 'rejected',
    reason,
    description,
  });
  if (err instanceof errors.JWTExpired) return reject('ID_TOKEN_EXPIRY', 'id_token has expired (exp)');
  if (err instanceof errors.JWTClaimValidationFailed) {
    const text = `id_token ${err.claim} claim: ${err.reason === 'missing' ? 'missing' : err.message}`;
    if (err.claim === 'iss') return reject('ID_TOKEN_ISSUER', text);
    if (err.claim === 'aud') return reject('ID_TOKEN_AUDIENCE', text);
    if (err.claim === 'exp')
      return reject(
        'ID_TOKEN_EXPIRY',
        err.reason === 'missing' ? 'id_token has no exp claim (required in strict mode)' : text,
      );
    return reject('ID_TOKEN_INVALID', text);
  }
  if (err instanceof errors.JWSSignatureVerificationFailed)
    return reject('ID_TOKEN_SIGNATURE', 'id_token signature is not valid');
  if (err instanceof errors.JWKSNoMatchingKey)
    return {
      status: 'rejected',
      reason: 'ID_TOKEN_SIGNATURE',
      description: "no key of the JWKS matches the id_token's kid and alg",
      unknownKey: true,
    };
  if (err instanceof errors.JOSEAlgNotAllowed)
    return reject('ID_TOKEN_SIGNATURE', 'id_token alg is not allowed (asymmetric signatures only)');
  // JWE errors cannot come from jwtVerify (an encrypted id_token is told apart before it): the token's, if ever.
  if (
    err instanceof errors.JWSInvalid ||
    err instanceof errors.JWTInvalid ||
    err instanceof errors.JOSENotSupported ||
    err instanceof errors.JWKSMultipleMatchingKeys ||
    err instanceof errors.JWEInvalid ||
    err instanceof errors.JWEDecryptionFailed
  ) {
    return reject('ID_TOKEN_INVALID', `id_token cannot be verified: ${err.message}`);
  }
  if (err instanceof JwksUnavailableError)
    return { status: 'unavailable', description: `the JWKS could not be loaded: ${err.message}` };
  // The keys' own trouble, in jose's fixed words: a JWKS member that is not a public key (JWKSInvalid), and what only a
  // remote or malformed key set throws (JWKSTimeout, JWKInvalid, the generic JOSEError).
  if (err instanceof errors.JOSEError)
    return { status: 'unavailable', description: `the JWKS could not be loaded: ${err.message}` };
  return null;
}
