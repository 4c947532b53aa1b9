// The id_token of a success notification: its claims, and its verification per OpenID CIBA Core §10.3.1
// (signature, iss, aud, exp as in OpenID Connect Core §3.1.3.7, plus the auth_req_id claim and at_hash).
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { createLocalJWKSet, createRemoteJWKSet, errors, jwtVerify, type JSONWebKeySet, type JWTVerifyGetKey } from 'jose';
import { LRUCache } from 'lru-cache';

export const AUTH_REQ_ID_CLAIM = 'urn:openid:params:jwt:claim:auth_req_id';

/** Asymmetric algorithms only: an HMAC "signature" keyed with a public key is the classic confusion attack. */
const ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519'];

export interface IdTokenClaims {
  sub: string;
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

/** The claims the gateway keeps, from a decoded claims set (wire.ts has checked that sub is a string). */
export function claimsOf(raw: Record<string, unknown>): IdTokenClaims {
  const str = (v: unknown) => (typeof v === 'string' ? v : null);
  const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : null);
  const amr = Array.isArray(raw.amr) ? raw.amr.filter((v): v is string => typeof v === 'string') : typeof raw.amr === 'string' ? [raw.amr] : null;
  const aud = Array.isArray(raw.aud) ? raw.aud.filter((v): v is string => typeof v === 'string') : typeof raw.aud === 'string' ? [raw.aud] : [];
  return {
    sub: String(raw.sub),
    acr: typeof raw.acr === 'number' ? String(raw.acr) : str(raw.acr),
    amr,
    iss: str(raw.iss),
    aud,
    exp: num(raw.exp),
    iat: num(raw.iat),
    authReqId: str(raw[AUTH_REQ_ID_CLAIM]),
  };
}

/**
 * at_hash (OpenID Connect Core §3.3.2.11): base64url of the left half of the hash of the access token, the
 * hash being the one of the id_token's alg (SHA-256 for *256, ...; SHA-512 for EdDSA/Ed25519). Null for an
 * alg with no known hash.
 */
export function atHash(accessToken: string, alg: string): string | null {
  const hash = /256$/.test(alg) ? 'sha256' : /384$/.test(alg) ? 'sha384' : /512$/.test(alg) || alg === 'EdDSA' || alg === 'Ed25519' ? 'sha512' : null;
  if (!hash) return null;
  const digest = createHash(hash).update(accessToken, 'ascii').digest();
  return digest.subarray(0, digest.length / 2).toString('base64url');
}

export type VerifyOutcome =
  /** Signature and claims checked; `keys` says against which JWKS. */
  | { status: 'verified'; keys: string }
  /** No JWKS to check against: the claims are decoded only. */
  | { status: 'unverified' }
  /** A check failed: the notification is refused with 400. */
  | { status: 'rejected'; reason: string }
  /** The keys could not be fetched: the gateway, not the sender, is at fault (503). */
  | { status: 'unavailable'; reason: string };

export interface VerifierOptions {
  /** The configured JWKS (MOBILEID_JWKS_URL or MOBILEID_JWKS_FILE, or the sandbox's); null when none is. */
  keys: { source: string; get: JWTVerifyGetKey } | null;
  issuer: string | undefined;
  clientId: string | undefined;
  /** Hosts whose jwks_endpoint (or jwks_uri) from a body may be fetched when no JWKS is configured. */
  allowedJwksHosts: readonly string[];
  clockToleranceSec?: number;
}

/** A JWKS from MOBILEID_JWKS_URL (fetched, cached, re-fetched on an unknown kid) or MOBILEID_JWKS_FILE (read once). */
export function configuredKeys(options: { jwksUrl?: string | undefined; jwksFile?: string | undefined }): VerifierOptions['keys'] {
  if (options.jwksFile) {
    let jwks: JSONWebKeySet;
    try {
      jwks = JSON.parse(fs.readFileSync(options.jwksFile, 'utf8')) as JSONWebKeySet;
    } catch (err) {
      throw new Error(`MOBILEID_JWKS_FILE ${options.jwksFile} is not a readable JSON file: ${(err as Error).message}`);
    }
    if (!jwks || !Array.isArray(jwks.keys)) throw new Error(`MOBILEID_JWKS_FILE ${options.jwksFile} is not a JWKS (no "keys" array)`);
    return { source: options.jwksFile, get: createLocalJWKSet(jwks) };
  }
  if (options.jwksUrl) return { source: options.jwksUrl, get: remoteKeys(options.jwksUrl) };
  return null;
}

function remoteKeys(url: string): JWTVerifyGetKey {
  return createRemoteJWKSet(new URL(url), { timeoutDuration: 5_000, cooldownDuration: 30_000, cacheMaxAge: 3_600_000 });
}

const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]']);

export class IdTokenVerifier {
  private readonly bodyKeys = new LRUCache<string, JWTVerifyGetKey>({ max: 32 });
  private readonly allowed: Set<string>;

  constructor(private readonly options: VerifierOptions) {
    this.allowed = new Set(options.allowedJwksHosts.map((h) => h.toLowerCase()));
  }

  private get canVerify(): boolean {
    return Boolean(this.options.issuer && this.options.clientId);
  }

  /**
   * True when a URL from a notification body may be fetched: its host (or host:port) is in
   * MOBILEID_JWKS_ALLOWED_HOSTS and it is https (http only on loopback).
   */
  mayFetch(url: string): boolean {
    let u: URL;
    try {
      u = new URL(url);
    } catch {
      return false;
    }
    if (!this.allowed.has(u.hostname.toLowerCase()) && !this.allowed.has(u.host.toLowerCase())) return false;
    return u.protocol === 'https:' || (u.protocol === 'http:' && LOOPBACK_HOSTS.has(u.hostname.toLowerCase()));
  }

  async check(input: { idToken: string; accessToken: string; authReqId: string; bodyJwksUrl: string | null }): Promise<VerifyOutcome> {
    if (!this.canVerify) return { status: 'unverified' };
    let keys = this.options.keys;
    if (!keys && input.bodyJwksUrl && this.mayFetch(input.bodyJwksUrl)) {
      const url = input.bodyJwksUrl;
      let get = this.bodyKeys.get(url);
      if (!get) {
        get = remoteKeys(url);
        this.bodyKeys.set(url, get);
      }
      keys = { source: url, get };
    }
    if (!keys) return { status: 'unverified' };

    let alg: string;
    let claims: IdTokenClaims;
    let tokenAtHash: unknown;
    try {
      const result = await jwtVerify(input.idToken, keys.get, {
        issuer: this.options.issuer!,
        audience: this.options.clientId!,
        algorithms: ALGORITHMS,
        requiredClaims: ['exp', 'sub'],
        clockTolerance: this.options.clockToleranceSec ?? 30,
      });
      alg = result.protectedHeader.alg;
      claims = claimsOf(result.payload as Record<string, unknown>);
      tokenAtHash = result.payload.at_hash;
    } catch (err) {
      return describeJoseError(err);
    }
    // OpenID CIBA Core §10.3.1: the id_token must be bound to this authentication request and access token.
    if (claims.authReqId !== input.authReqId) {
      return { status: 'rejected', reason: `id_token's ${AUTH_REQ_ID_CLAIM} claim does not equal the body's auth_req_id` };
    }
    const expected = atHash(input.accessToken, alg);
    if (typeof tokenAtHash !== 'string') return { status: 'rejected', reason: 'id_token has no at_hash claim (required with an access_token)' };
    if (expected === null || tokenAtHash !== expected) return { status: 'rejected', reason: "id_token's at_hash does not match the access_token" };
    return { status: 'verified', keys: keys.source };
  }
}

function describeJoseError(err: unknown): VerifyOutcome {
  if (err instanceof errors.JWTExpired) return { status: 'rejected', reason: 'id_token has expired (exp)' };
  if (err instanceof errors.JWTClaimValidationFailed) return { status: 'rejected', reason: `id_token ${err.claim} claim: ${err.reason === 'missing' ? 'missing' : err.message}` };
  if (err instanceof errors.JWSSignatureVerificationFailed) return { status: 'rejected', reason: 'id_token signature is not valid' };
  if (err instanceof errors.JWKSNoMatchingKey) return { status: 'rejected', reason: "no key of the JWKS matches the id_token's kid and alg" };
  if (err instanceof errors.JOSEAlgNotAllowed) return { status: 'rejected', reason: 'id_token alg is not allowed (asymmetric signatures only)' };
  if (err instanceof errors.JWSInvalid || err instanceof errors.JWTInvalid || err instanceof errors.JOSENotSupported || err instanceof errors.JWKSMultipleMatchingKeys) {
    return { status: 'rejected', reason: `id_token cannot be verified: ${err.message}` };
  }
  // Timeouts, connection failures, a JWKS that does not answer 200 or is not a JWKS: our side's trouble.
  return { status: 'unavailable', reason: `the JWKS could not be loaded: ${err instanceof Error ? err.message : String(err)}` };
}
