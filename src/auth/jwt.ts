// Apps that sign in with their identity provider's JWTs (docs/decisions/047): `Authorization: Bearer <JWT>`, verified
// with jose against the provider's JWKS (RFC 7515 signature, RFC 7519 §4.1 iss/aud/exp/nbf, RFC 8725 best practices).
import {
  createLocalJWKSet,
  decodeJwt,
  decodeProtectedHeader,
  errors,
  jwtVerify,
  type FlattenedJWSInput,
  type JWSHeaderParameters,
  type JWTPayload,
} from 'jose';
import { LRUCache } from 'lru-cache';

import { shownUrl } from '../errors.js';
import { logUnexpected, type Logger } from '../logger.js';
import {
  APP_NAME,
  Grants,
  isScope,
  KEY_LABEL,
  KEY_LABEL_RULE,
  scopeOfApp,
  sha256,
  type Caller,
  type Scope,
} from './caller.js';
import {
  ASYMMETRIC_ALGORITHMS,
  fetchJwks,
  jwksFailure,
  keyOf,
  readJwksFile,
  shownKid,
  unusableKeyOf,
  usableKeys,
  type JwksFile,
  type UnusableKey,
} from './jwks-fetch.js';
import type { JwtAppEntry, JwtAuthConfig, JwtIssuerConfig } from './jwt-config.js';
import type { AuthResult, RequestLog } from './keys.js';

/**
 * Skew allowed between the provider's clock and ours, for nbf and iat only: a token minted a moment "in the future"
 * by a provider whose clock runs ahead is common. exp is judged strictly (below), so a connection opened with a token
 * ends exactly when a new request with the same token would be refused.
 */
const CLOCK_TOLERANCE_SECONDS = 30;
/** The claims that name the app when AUTH_APP_CLAIM is unset, first present wins (RFC 9068 §2.2: client_id; OIDC: azp). */
const DEFAULT_APP_CLAIMS = ['azp', 'client_id', 'sub'] as const;
/** Compact JWS: three base64url segments (the signature may be empty, as `alg: none` writes it). */
const COMPACT_JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

/** The keys could not be fetched: the gateway's side (or the provider's) is at fault, not the app's token. */
export class JwksUnavailableError extends Error {}

/** True when `token` has the shape of a compact JWS with a readable header: only those are verified as JWTs. */
export function looksLikeJwt(token: string): boolean {
  if (!COMPACT_JWS.test(token)) return false;
  try {
    return typeof decodeProtectedHeader(token).alg === 'string';
  } catch {
    return false;
  }
}

export interface JwksKeysOptions {
  source: JwtIssuerConfig['jwks'];
  /** The variable a bad file is reported under: AUTH_JWKS_FILE, or AUTH_ISSUERS for an issuer's jwksFile. */
  variable?: string;
  /** AUTH_JWKS_REFRESH_INTERVAL: at most one fetch per interval, whatever asks for it. */
  refreshIntervalMs: number;
  /** Epoch ms (tests control it). */
  now: () => number;
  /** The gateway's: a fetch's failure, and an unexpected error where no request's logger is given. */
  logger: Logger;
}

/**
 * The provider's JWKS: read from AUTH_JWKS_FILE (at start, and again by each reload, which makes a new JwksKeys), or fetched from AUTH_JWKS_URL and cached. A fetched JWKS is
 * fetched again when it is older than the interval, or when a token names a kid it lacks (a key rotated in), but never
 * more than once per interval (a stream of tokens with made-up kids must not make the gateway hammer the provider).
 * A failed fetch keeps the keys already fetched: tokens signed by them keep working while the provider is down.
 * jose's createRemoteJWKSet is not used because it drops its cached keys once they are older than its max age and the
 * refetch fails, and it retries a failing fetch on every token.
 */
export class JwksKeys {
  private local: ReturnType<typeof createLocalJWKSet> | null = null;
  /** Counts the key sets fetched: a token verified under an earlier set is verified again (a key may be gone). */
  version = 0;
  /** When keys were last fetched (epoch ms). */
  private fetchedAt = -Infinity;
  /** When a fetch last started, whatever its outcome. */
  private attemptedAt = -Infinity;
  /** Why the last fetch failed; null after a success. */
  private failure: string | null = null;
  private pending: Promise<void> | null = null;
  /** The signing keys of the last fetched JWKS that cannot be used (jwks-fetch.ts usableKeys). */
  private unusable: readonly UnusableKey[] = [];
  /** The JWKS URL, or null for a file. */
  readonly url: string | null;
  /** The file's keys as read (those passed over among them), or null for a URL. */
  private readonly file: JwksFile | null = null;

  constructor(private readonly options: JwksKeysOptions) {
    const source = options.source;
    if ('file' in source) {
      this.url = null;
      this.file = readJwksFile(options.variable ?? 'AUTH_JWKS_FILE', source.file);
      this.local = createLocalJWKSet(this.file.jwks);
    } else {
      this.url = source.url;
    }
  }

  /**
   * Logs, once, the keys of its file that are passed over (jwks-fetch.ts readJwksFile): called when these keys come
   * into force, at start or by the reload that swaps them in. A URL's unusable keys are logged at each fetch.
   */
  inForce(): void {
    this.file?.warn(this.options.logger);
  }

  /** False once the keys are older than the refresh interval: the next token's verification fetches them again. */
  fresh(): boolean {
    return this.url === null || this.options.now() - this.fetchedAt < this.options.refreshIntervalMs;
  }

  /** Where the keys come from (for logs and errors). */
  get source(): string {
    return this.url === null ? (this.options.source as { file: string }).file : shownUrl(this.url);
  }

  /** The gateway's logger, for an unexpected error of a verification no request's logger is given for. */
  get logger(): Logger {
    return this.options.logger;
  }

  /**
   * Fetches the JWKS unless a fetch ran within the interval (or one is running: then waits for it). `request`: the
   * request that asks for it, whose logger (with its request id) an unexpected error of the fetch is logged with.
   */
  refresh(request?: RequestLog): Promise<void> {
    if (this.pending) return this.pending;
    if (this.url === null || this.options.now() - this.attemptedAt < this.options.refreshIntervalMs)
      return Promise.resolve();
    this.attemptedAt = this.options.now();
    this.pending = this.fetch(this.url, request).finally(() => (this.pending = null));
    return this.pending;
  }

  /**
   * jose's key lookup: the key of the token's kid (and alg). Keys older than the interval are fetched again in the
   * background while the cached ones answer; a token whose kid they lack waits for that fetch (a key just rotated in).
   * `request`: the request the token came with (see refresh).
   */
  async keyFor(header: JWSHeaderParameters, token: FlattenedJWSInput, request?: RequestLog): Promise<CryptoKey> {
    if (this.url !== null && this.options.now() - this.fetchedAt >= this.options.refreshIntervalMs) {
      const refreshing = this.refresh(request);
      if (!this.local) await refreshing;
    }
    if (!this.local)
      throw new JwksUnavailableError(
        `the identity provider's keys (${this.source}) could not be fetched: ${this.failure ?? 'not fetched yet'}`,
      );
    try {
      return await this.lookUp(header, token, request);
    } catch (err) {
      if (!(err instanceof errors.JWKSNoMatchingKey) || this.url === null) throw err;
      if (this.pending) {
        await this.pending;
        try {
          return await this.lookUp(header, token, request);
        } catch (again) {
          if (!(again instanceof errors.JWKSNoMatchingKey)) throw again;
        }
      }
      // The gateway could not look for the kid: its fault (or the provider's), not the token's.
      if (this.failure !== null) {
        throw new JwksUnavailableError(
          `no key fetched so far matches the JWT's kid, and the identity provider's keys (${this.source}) could not be fetched again: ${this.failure}`,
        );
      }
      // The provider published the kid with a key the gateway cannot use: its fault too (warned at the fetch).
      const unusable = unusableKeyOf(this.unusable, header.kid);
      if (unusable) throw this.unusableKey(header.kid, unusable.reason);
      throw err;
    }
  }

  /** The key jose finds in the fetched set (jwks-fetch.ts keyOf): a key it cannot import is the provider's fault. */
  private lookUp(header: JWSHeaderParameters, token: FlattenedJWSInput, request?: RequestLog) {
    return keyOf(this.local!, header, token, (kid, reason, err) => {
      (request?.logger ?? this.options.logger).warn(
        { jwks: this.source, kid, reason, err },
        "a key of the identity provider's JWKS cannot be used: tokens that name its kid are answered 503 UPSTREAM_UNAVAILABLE",
      );
      return this.unusableKey(kid, reason);
    });
  }

  private unusableKey(kid: unknown, reason: string): JwksUnavailableError {
    return new JwksUnavailableError(
      `the identity provider's keys (${this.source}) hold no usable key of the JWT's kid ${shownKid(kid)}: ${reason}`,
    );
  }

  private async fetch(url: string, request: RequestLog | undefined): Promise<void> {
    try {
      const { usable, unusable } = usableKeys(await fetchJwks(url));
      this.local = createLocalJWKSet(usable);
      this.unusable = unusable;
      for (const key of unusable)
        this.options.logger.warn(
          { jwks: shownUrl(url), kid: key.kid ?? null, reason: key.reason },
          "a key of the identity provider's JWKS cannot be used: tokens that name its kid are answered 503 UPSTREAM_UNAVAILABLE until the JWKS is fixed",
        );
      this.version += 1;
      this.fetchedAt = this.options.now();
      this.failure = null;
    } catch (err) {
      // The failure is named in JwksUnavailableError, which apps read (401/503 answers, close reasons): a bug's words
      // go to the log, with the request that asked for the fetch (none when a start or a reload did).
      this.failure = jwksFailure(err, url, request?.logger ?? this.options.logger, "the identity provider's");
      this.options.logger.warn(
        { jwks: shownUrl(url), reason: this.failure, cached: this.local !== null },
        "the identity provider's JWKS could not be fetched: keys fetched before (if any) keep working",
      );
    }
  }
}

/** The claims scopes are read from when AUTH_SCOPE_CLAIMS is unset. */
const DEFAULT_SCOPE_CLAIMS = ['scope', 'scp'] as const;

/**
 * The gateway scopes a token grants: the words of each claim of `claims` (AUTH_SCOPE_CLAIMS, default `scope`
 * space-separated and `scp` an array or space-separated; Entra ID's `roles` is an array), with the prefix.
 */
export function scopesOf(
  payload: JWTPayload,
  prefix: string,
  claims: readonly string[] = DEFAULT_SCOPE_CLAIMS,
): Scope[] {
  const words = (claim: unknown): string[] =>
    typeof claim === 'string'
      ? claim.split(/\s+/)
      : Array.isArray(claim)
        ? claim.filter((v): v is string => typeof v === 'string')
        : [];
  const scopes: Scope[] = [];
  for (const word of claims.flatMap((claim) => words(payload[claim]))) {
    if (!word.startsWith(prefix)) continue;
    const scope = word.slice(prefix.length);
    if (isScope(scope)) scopes.push(scope);
  }
  return scopes;
}

/** The claim a token names its app by, and its value, or why it names none. */
function appClaimOf(
  payload: JWTPayload,
  claim: string | null,
): { claim: string; value: unknown } | { refused: string } {
  const names = claim === null ? DEFAULT_APP_CLAIMS : [claim];
  const found = names.find((name) => payload[name] !== undefined);
  if (found === undefined) return { refused: `the JWT has no ${names.join(', ')} claim to name the app` };
  return { claim: found, value: payload[found] };
}

/** A set of names as JwtApps reads it: one lookup per token resolved, never a database read. */
export interface KnownNames {
  has(name: string): boolean;
}

const NO_NAMES: KnownNames = new Set<string>();

/**
 * Where the names `*` accepts are recorded (src/store/key-app-names.ts AcceptedNames) before the first request under
 * each is served: a key app configured later may not take one. True once recorded (at once for a name recorded
 * before); false when the name has been configured on the database since (refused as `configured_name`).
 */
export interface WildcardNames {
  accept(name: string): boolean | Promise<boolean>;
}

/**
 * Which JWT apps the gateway accepts (AUTH_APPS) and under which name, as a verified token's claim value finds them:
 * a listed claim value (a name, or a client id with `=<name>`), or with `*` any value that is an app name and not the
 * name of an app configured with keys, nor one an entry lists, now or before. A name is an app name (APP_NAME: ASCII
 * letters, digits, `_`, `.`, `-`), the configured names' syntax, so that a name is one string for every reader (no
 * homoglyph, no `:` to make two owner keys meet).
 */
export class JwtApps {
  private readonly listed: ReadonlyMap<string, JwtAppEntry>;
  /** The names listed entries give: `*` takes none of them (each is the app of its own claim value only). */
  private readonly names: ReadonlySet<string>;
  private readonly any: boolean;
  private readonly operators: ReadonlySet<string>;

  /**
   * `configured`: every configured app's name (keys, the apps file, bare keys' labels); a JWT takes none unless listed
   * `name=<it>`. `elsewhere`: the apps other identity providers list (AUTH_ISSUERS), which `*` does not take.
   * `configuredBefore`: the names of apps configured on this gateway's database, with keys or listed by an identity
   * provider's entry, now or before (src/store/key-app-names.ts), which `*` does not take either unless an entry lists
   * it now (refused above for another reason, or listed here): a removed app's data is still owned by its name.
   */
  constructor(
    config: Pick<JwtIssuerConfig, 'apps' | 'operatorApps'>,
    private readonly configured: ReadonlySet<string>,
    private readonly elsewhere: ReadonlySet<string> = new Set(),
    private readonly configuredBefore: KnownNames = NO_NAMES,
  ) {
    this.listed = new Map(config.apps.listed.map((e) => [e.claim, e]));
    this.names = new Set(config.apps.listed.map((e) => e.app));
    this.any = config.apps.any;
    this.operators = new Set(config.operatorApps);
  }

  /**
   * The app a claim value is, or why it is refused (the value is never repeated: it may be anything). `anyClaim`: the
   * name was taken through `*` (not listed) from that claim, and is recorded as `*`'s before it is served
   * (WildcardNames).
   */
  resolve(claim: string, value: unknown): ResolvedApp | AppRefusal {
    if (typeof value !== 'string')
      return { refused: `the JWT's ${claim} claim is not an app name (${APP_NAME_RULE})`, reason: 'app_name' };
    const entry = this.listed.get(value);
    if (entry)
      return entry.sameAsConfigured || !this.configured.has(entry.app) ? { app: entry.app } : configuredRefusal(claim);
    if (!APP_NAME.test(value))
      return { refused: `the JWT's ${claim} claim is not an app name (${APP_NAME_RULE})`, reason: 'app_name' };
    if (!this.any)
      return {
        refused: `the JWT's ${claim} claim names no app this gateway accepts (AUTH_APPS)`,
        reason: 'not_accepted',
      };
    if (this.configured.has(value)) return configuredRefusal(claim);
    // `<client id>=billing`: another client whose id is `billing`, or a user's token named by its sub, is not billing.
    if (this.names.has(value))
      return {
        refused: `the JWT's ${claim} claim names an app AUTH_APPS gives to another claim value (<claim value>=<name>): only that value signs in as it`,
        reason: 'not_accepted',
      };
    // Whether or not a bare key has that label now: one configured later would share the name with this app.
    if (KEY_LABEL.test(value))
      return { refused: `the JWT's ${claim} claim is refused as an app name: ${KEY_LABEL_RULE}`, reason: 'app_name' };
    if (this.elsewhere.has(value))
      return {
        refused: `the JWT's ${claim} claim names an app another identity provider of AUTH_ISSUERS signs in: list it in this provider's apps as <claim value>=<name> to make them one app`,
        reason: 'other_issuer',
      };
    // No entry lists it now, but one did, or it was a key app: its data is still owned by the name.
    if (this.configuredBefore.has(value)) return configuredBeforeRefusal(claim);
    return { app: value, anyClaim: claim };
  }

  /** The scopes a token of `app` grants: `operator` only for the apps of AUTH_OPERATOR_APPS. */
  grants(app: string, scopes: readonly Scope[]): Grants {
    return Grants.of(this.operators.has(app) ? scopes : scopes.filter((s) => s !== 'operator'));
  }
}

const APP_NAME_RULE = '1 to 64 ASCII letters, digits, `_`, `.` or `-`, starting with a letter or digit';

/**
 * Why a verified token names no app the gateway accepts (gateway_jwt_refusals_total's `reason`): no app claim, a value
 * outside APP_NAME, an app AUTH_APPS does not list, a configured app's name that AUTH_APPS does not make one (and,
 * under `*`, a name configured with keys or listed by an entry before), or (`*`) an app another provider of
 * AUTH_ISSUERS lists.
 */
export type AppRefusalReason = 'no_app_claim' | 'app_name' | 'not_accepted' | 'configured_name' | 'other_issuer';
type AppRefusal = { refused: string; reason: AppRefusalReason };
type ResolvedApp = { app: string; anyClaim?: string };

function configuredRefusal(claim: string): AppRefusal {
  return {
    refused: `the JWT's ${claim} claim names an app configured with API keys on this gateway, now or before (GATEWAY_API_KEYS, OPERATOR_API_KEYS or GATEWAY_APPS_FILE); a JWT is that app only when AUTH_APPS says so (<claim value>=<app>)`,
    reason: 'configured_name',
  };
}

function configuredBeforeRefusal(claim: string): AppRefusal {
  return {
    refused: `the JWT's ${claim} claim names an app configured with API keys or listed by an identity provider on this gateway before (GATEWAY_API_KEYS, OPERATOR_API_KEYS, GATEWAY_APPS_FILE, AUTH_APPS or AUTH_ISSUERS' apps), whose data its name still owns; a JWT is that app only when AUTH_APPS (or the issuer's apps) lists it (<app>, or <claim value>=<app>)`,
    reason: 'configured_name',
  };
}

/** The app a token names, or why it names none (AUTH_APPS `*` and no configured app: the claim's syntax alone). */
export function appOf(
  payload: JWTPayload,
  claim: string | null,
  apps: JwtApps = ANY_APP,
): { app: string } | AppRefusal {
  const resolved = resolveApp(payload, claim, apps);
  return 'refused' in resolved ? resolved : { app: resolved.app };
}

/** appOf, and whether the name was taken through `*` (from which claim). */
function resolveApp(payload: JWTPayload, claim: string | null, apps: JwtApps): ResolvedApp | AppRefusal {
  const found = appClaimOf(payload, claim);
  return 'refused' in found
    ? { refused: found.refused, reason: 'no_app_claim' }
    : apps.resolve(found.claim, found.value);
}

const ANY_APP = new JwtApps({ apps: { any: true, listed: [] }, operatorApps: [] }, new Set());

/** How long until a caller's token expires (ms, at least 0); null for a caller without an expiry (an API key). */
export function expiryDelay(caller: Caller, now: number): number | null {
  return caller.expiresAt === undefined ? null : Math.max(0, caller.expiresAt - now);
}

/** One identity provider's verification: its settings, its keys and the apps it may sign in. */
interface IssuerVerifier {
  readonly config: JwtIssuerConfig;
  readonly keys: JwksKeys;
  readonly apps: JwtApps;
}

/**
 * The JWT half of the transport's authentication: a verified token is its app's caller (owner scope `app:<name>`),
 * an app AUTH_APPS accepts, with the scopes the token grants (`operator` only for AUTH_OPERATOR_APPS) and the token's
 * expiry. It is the same app as the API keys `<name>:<key>` only when AUTH_APPS says so (`<claim value>=<name>`).
 * With several providers (AUTH_ISSUERS, docs/decisions/058) a token is verified by the provider of its iss only: its
 * keys, audience, app claim, scope claims and apps; a token whose iss is no provider's is refused before any key is
 * looked up. An authenticator is immutable: a reload makes a new one (docs/decisions/057), and a verification in
 * flight finishes with the one it started with.
 */
export class JwtAuthenticator {
  /**
   * Tokens verified, by their SHA-256: a token that every request of an app carries is verified once (what that costs
   * is in decision 047) and then answers from here until its exp, or until its provider's keys are older than the refresh
   * interval (the next verification fetches them again, and a token verified under the earlier set is verified again:
   * its key may have been removed), or until the clock runs back before it was verified. Each entry names the provider
   * that verified it, whose keys it is judged by. At most `verifiedCacheSize` (AUTH_JWT_CACHE_SIZE, default 10,000:
   * about 3 MB) entries, least recently used first out. Refusals are never kept.
   */
  private readonly verified: LRUCache<
    string,
    { caller: Caller; issuer: IssuerVerifier; keys: number; at: number }
  > | null;
  private readonly byIssuer: ReadonlyMap<string, IssuerVerifier>;
  /** The one provider of the AUTH_* variables, which judges every token (jose names a wrong iss); null with AUTH_ISSUERS. */
  private readonly only: IssuerVerifier | null;

  constructor(
    private readonly config: JwtAuthConfig,
    /** Each provider's keys, in the order of `config.issuers`. */
    keys: readonly JwksKeys[],
    private readonly now: () => number,
    /** The names of the apps configured with keys, which a JWT may take only as AUTH_APPS says. */
    configured: ReadonlySet<string>,
    /** The apps-file apps' `approves`: a JWT that is such an app (AUTH_APPS `name=name`) approves no more than it. */
    private readonly approves: ReadonlyMap<string, readonly string[]> = new Map(),
    /** Told of each token checked: verified by jose, or answered from the cache (gateway_jwt_checks_total). */
    private readonly count: (check: 'verified' | 'cached') => void = () => undefined,
    /** Told of each verified token refused for the app it names (gateway_jwt_refusals_total). */
    private readonly refuse: (reason: AppRefusalReason) => void = () => undefined,
    /**
     * The names of apps configured on this gateway's database (with keys, or listed by a provider's entry), now or
     * before, which `*` does not take unless an entry lists it.
     */
    configuredBefore: KnownNames = NO_NAMES,
    /** Where the names `*` accepts are recorded before they are served; unset: nowhere (tests of the resolution). */
    private readonly wildcardNames?: WildcardNames,
  ) {
    this.verified = config.verifiedCacheSize > 0 ? new LRUCache({ max: config.verifiedCacheSize }) : null;
    const verifiers = config.issuers.map((issuer, i) => {
      const elsewhere = new Set(
        config.issuers.flatMap((other) => (other === issuer ? [] : other.apps.listed.map((a) => a.app))),
      );
      for (const listed of issuer.apps.listed) elsewhere.delete(listed.app);
      return { config: issuer, keys: keys[i]!, apps: new JwtApps(issuer, configured, elsewhere, configuredBefore) };
    });
    this.byIssuer = new Map(verifiers.map((v) => [v.config.issuer, v]));
    this.only = config.issuersFile === null && verifiers.length === 1 ? verifiers[0]! : null;
  }

  /** `request`: the request the token came with, whose logger (with its request id) an unexpected error goes to. */
  async authenticate(token: string, request?: RequestLog): Promise<AuthResult> {
    const at = this.now();
    const id = this.verified ? sha256(token).toString('base64') : null;
    if (id !== null) {
      const hit = this.verified!.get(id);
      const keys: JwksKeys | undefined = hit?.issuer.keys;
      if (hit && keys && hit.keys === keys.version && keys.fresh() && at >= hit.at && at < hit.caller.expiresAt!) {
        this.count('cached');
        return { ok: true, caller: hit.caller };
      }
    }
    const issuer = this.only ?? this.issuerOf(token);
    if ('refused' in issuer) {
      this.count('verified');
      return invalid(issuer.refused);
    }
    const keys = issuer.keys.version;
    const result = await this.verify(issuer, token, at, request);
    if (id !== null && result.ok && issuer.keys.version === keys)
      this.verified!.set(id, { caller: result.caller, issuer, keys, at });
    return result;
  }

  /** The provider a token's iss names (read before its signature is checked: only to choose the keys). */
  private issuerOf(token: string): IssuerVerifier | { refused: string } {
    let iss: unknown;
    try {
      iss = decodeJwt(token).iss;
    } catch {
      return { refused: 'the JWT cannot be verified: its payload is not a JSON object' };
    }
    if (typeof iss !== 'string')
      return {
        refused: 'the JWT has no iss claim: the gateway cannot tell which identity provider (AUTH_ISSUERS) issued it',
      };
    const found = this.byIssuer.get(iss);
    if (found) return found;
    return {
      refused: `the JWT's iss ${JSON.stringify(iss.length > 200 ? `${iss.slice(0, 200)}…` : iss)} is not an identity provider this gateway trusts (AUTH_ISSUERS)`,
    };
  }

  private async verify(
    issuer: IssuerVerifier,
    token: string,
    at: number,
    request: RequestLog | undefined,
  ): Promise<AuthResult> {
    this.count('verified');
    const config = issuer.config;
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, (header, jws) => issuer.keys.keyFor(header, jws, request), {
        algorithms: ASYMMETRIC_ALGORITHMS,
        issuer: config.issuer,
        audience: [...config.audience],
        requiredClaims: ['exp'],
        clockTolerance: CLOCK_TOLERANCE_SECONDS,
        currentDate: new Date(at),
      }));
    } catch (err) {
      const refused = refusal(err);
      if (refused === null) {
        logUnexpected(
          request?.logger ?? issuer.keys.logger,
          err,
          { issuer: config.issuer },
          'unexpected error while a JWT was verified: it is refused as one that cannot be verified',
        );
        return invalid(UNEXPECTED_REFUSAL);
      }
      return refused;
    }
    const expiresAt = payload.exp! * 1000;
    if (expiresAt <= at) return invalid(`the JWT has expired (exp ${new Date(expiresAt).toISOString()})`);
    // jose checks that iat is a number, but judges it against the clock only with maxTokenAge (which would make iat
    // required): a token issued beyond the skew in the future is refused here, as nbf is.
    if (payload.iat !== undefined && payload.iat > at / 1000 + CLOCK_TOLERANCE_SECONDS)
      return invalid(
        `the JWT was issued in the future (iat), beyond the ${CLOCK_TOLERANCE_SECONDS} s of clock skew allowed`,
      );
    const named = resolveApp(payload, config.appClaim, issuer.apps);
    if ('refused' in named) {
      this.refuse(named.reason);
      return invalid(named.refused);
    }
    if (named.anyClaim !== undefined && this.wildcardNames) {
      let accepted: boolean;
      try {
        const result = this.wildcardNames.accept(named.app);
        accepted = typeof result === 'boolean' ? result : await result;
      } catch (err) {
        logUnexpected(
          request?.logger ?? issuer.keys.logger,
          err,
          { issuer: config.issuer, app: named.app },
          "unexpected error while the name of a JWT's app accepted through AUTH_APPS * was recorded: the JWT is refused as one that cannot be verified",
        );
        return invalid(UNEXPECTED_REFUSAL);
      }
      if (!accepted) {
        this.refuse('configured_name');
        return invalid(configuredBeforeRefusal(named.anyClaim).refused);
      }
    }
    const approves = this.approves.get(named.app);
    const caller: Caller = Object.freeze({
      scope: scopeOfApp(named.app),
      app: named.app,
      grants: issuer.apps.grants(named.app, scopesOf(payload, config.scopePrefix, config.scopeClaims)),
      expiresAt,
      via: 'JWT',
      ...(approves ? { approves } : {}),
    });
    return { ok: true, caller };
  }
}

function invalid(message: string): AuthResult {
  return { ok: false, reason: 'invalid', message };
}

/** What an app is told of a verification that failed on an unexpected error (a bug's): none of the error's words. */
const UNEXPECTED_REFUSAL = 'the JWT cannot be verified';

/**
 * What a failed verification tells the app: which check failed, never the token; null for an error neither jose's nor
 * the keys' (a bug's), which the caller logs and answers with UNEXPECTED_REFUSAL.
 */
function refusal(err: unknown): AuthResult | null {
  if (err instanceof JwksUnavailableError) return { ok: false, reason: 'unavailable', message: err.message };
  if (err instanceof errors.JWTExpired) {
    const exp = typeof err.payload.exp === 'number' ? ` (exp ${new Date(err.payload.exp * 1000).toISOString()})` : '';
    return invalid(`the JWT has expired${exp}`);
  }
  if (err instanceof errors.JWTClaimValidationFailed) {
    if (err.claim === 'nbf') return invalid('the JWT is not valid yet (nbf)');
    if (err.claim === 'iss')
      return invalid("the JWT's iss is not the identity provider the gateway trusts (AUTH_ISSUER)");
    if (err.claim === 'aud') return invalid("the JWT's aud does not name this gateway (AUTH_AUDIENCE)");
    if (err.claim === 'exp' && err.reason === 'missing')
      return invalid('the JWT has no exp claim: tokens that never expire are refused');
    return invalid(`the JWT's ${err.claim} claim is not valid: ${err.reason}`);
  }
  if (err instanceof errors.JOSEAlgNotAllowed)
    return invalid("the JWT's alg is not accepted: asymmetric signatures only (RS*, PS*, ES*, EdDSA)");
  if (err instanceof errors.JWSSignatureVerificationFailed)
    return invalid("the JWT's signature does not verify with the identity provider's key of its kid");
  if (err instanceof errors.JWKSNoMatchingKey)
    return invalid(
      "no key of the identity provider's JWKS (AUTH_JWKS_URL or AUTH_JWKS_FILE) matches the JWT's kid and alg",
    );
  if (err instanceof errors.JOSEError) return invalid(`the JWT cannot be verified: ${err.message}`);
  return null;
}

/** Node's timers hold at most 2^31−1 ms (about 24.8 days); a longer delay is waited in steps. */
const MAX_TIMER_MS = 2_147_483_647;

/** Runs `expire` after `delayMs` on a timer that does not keep the process alive; returns the cancel. */
export function scheduleAfter(delayMs: number, expire: () => void): () => void {
  let timer: NodeJS.Timeout;
  const wait = (left: number) => {
    timer = setTimeout(
      () => (left > MAX_TIMER_MS ? wait(left - MAX_TIMER_MS) : expire()),
      Math.min(left, MAX_TIMER_MS),
    );
    timer.unref();
  };
  wait(delayMs);
  return () => clearTimeout(timer);
}

/** What the streaming transports need to end a connection when its JWT expires. */
export interface AuthExpiry {
  now(): number;
  /** Runs `expire` after `delayMs`; returns the cancel. */
  schedule(delayMs: number, expire: () => void): () => void;
}

/**
 * Schedules `end` for when the caller's token expires, with the reason to give the app; returns the cancel (a no-op
 * for a caller without an expiry, such as an API key's).
 */
export function onExpiry(expiry: AuthExpiry | undefined, caller: Caller, end: (reason: string) => void): () => void {
  const delay = expiry ? expiryDelay(caller, expiry.now()) : null;
  if (delay === null) return NOTHING;
  return expiry!.schedule(delay, () => end(expiredReason(caller)));
}

/**
 * The reason onExpiry gives, when the caller's token has expired on the expiry's clock already (its scheduled end may
 * not have fired yet: a timer that runs late, a clock that moved); else null.
 */
export function expiredNow(expiry: AuthExpiry | undefined, caller: Caller): string | null {
  return expiry && expiryDelay(caller, expiry.now()) === 0 ? expiredReason(caller) : null;
}

function expiredReason(caller: Caller): string {
  return `the JWT expired at ${new Date(caller.expiresAt!).toISOString()}`;
}

const NOTHING = () => {};
