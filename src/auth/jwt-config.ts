// What the AUTH_* variables (or AUTH_ISSUERS) say about the identity providers of apps' JWTs: parsed by
// src/config/index.ts, read by src/auth/jwt.ts.

export interface JwtAuthConfig {
  /** AUTH_ISSUERS (an absolute path), or null when the AUTH_* variables name the one provider. */
  readonly issuersFile: string | null;
  /** One entry per provider; a token is verified by the entry of its iss only. */
  readonly issuers: readonly JwtIssuerConfig[];
  readonly refreshIntervalMs: number;
  /** AUTH_JWT_CACHE_SIZE: verified tokens remembered until their exp or the next JWKS fetch; 0 verifies every request. */
  readonly verifiedCacheSize: number;
}

/** One identity provider: AUTH_JWKS_URL, AUTH_ISSUER, … or an entry of AUTH_ISSUERS. */
export interface JwtIssuerConfig {
  /** AUTH_JWKS_URL, or AUTH_JWKS_FILE (an absolute path): exactly one is set. */
  readonly jwks: { readonly url: string } | { readonly file: string };
  readonly issuer: string;
  readonly audience: readonly string[];
  /** AUTH_APP_CLAIM; null: the first present of azp, client_id, sub. */
  readonly appClaim: string | null;
  /** AUTH_APPS: the JWT apps accepted (src/auth/jwt.ts JwtApps). */
  readonly apps: { readonly any: boolean; readonly listed: readonly JwtAppEntry[] };
  /** AUTH_OPERATOR_APPS: the apps whose JWTs may grant `operator`. */
  readonly operatorApps: readonly string[];
  readonly scopePrefix: string;
  /** AUTH_SCOPE_CLAIMS: the claims scopes are read from (`scope`, `scp`, Entra ID's `roles`). */
  readonly scopeClaims: readonly string[];
}

/** An entry of AUTH_APPS: the app claim's value, the app it is, and whether the entry was written `<value>=<app>`. */
export interface JwtAppEntry {
  readonly claim: string;
  readonly app: string;
  /**
   * Written `<value>=<app>`: the operator named the app, so it may be an app configured with keys (they are then one
   * app). A bare entry naming a configured app stops start-up: that sameness must be said, not fallen into.
   */
  readonly sameAsConfigured: boolean;
}

/**
 * The names the providers' entries list (bare, or the `<name>` of `<claim value>=<name>`; not `*`): recorded in the
 * database as configured app names (src/store/key-app-names.ts), which no `*` entry takes unless an entry lists them.
 */
export function listedAppNames(jwtAuth: JwtAuthConfig | null): string[] {
  return (jwtAuth?.issuers ?? []).flatMap((issuer) => issuer.apps.listed.map((entry) => entry.app));
}
