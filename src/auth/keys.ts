import type { Logger } from '../logger.js';
import type { AppFileEntry } from './apps-file.js';
import {
  ALL_GRANTS,
  APP_GRANTS,
  Grants,
  indexOfDigest,
  OPEN_CALLER,
  scopeOfApp,
  scopeOfKeyDigest,
  sha256,
  type AppKey,
  type AppSource,
  type Caller,
  type Scope,
} from './caller.js';

/** The token of an `Authorization: Bearer <token>` value (scheme case-insensitive), or null. */
export function bearerToken(header: string | string[] | undefined | null): string | null {
  const value = Array.isArray(header) ? (header.length === 1 ? header[0] : undefined) : header;
  if (!value) return null;
  const m = /^\s*Bearer\s+(\S+)\s*$/i.exec(value);
  return m ? m[1]! : null;
}

/**
 * A request's Authorization header as authentication reads it: its one value, or every value when it came more than
 * once. Node keeps the first of repeated Authorization headers and drops the others, while a proxy in front may read
 * the last: such a request is refused (createAuthenticator), never taken as whichever app came first.
 */
export function authorizationOf(req: {
  readonly headers: { readonly authorization?: string | undefined };
  readonly rawHeaders: readonly string[];
}): string | string[] | undefined {
  const first = req.headers.authorization;
  if (first === undefined) return undefined;
  const raw = req.rawHeaders;
  let values: string[] | null = null;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    if (name.length === 13 && name.toLowerCase() === 'authorization') (values ??= []).push(raw[i + 1]!);
  }
  return values !== null && values.length > 1 ? values : first;
}

/**
 * Why a request is not let in: no credentials (`missing`), credentials that are not valid (`invalid`: 401, or 4401 and
 * 4403 on graphql-ws), or a JWT whose keys the gateway could not fetch (`unavailable`: the fault is not the app's, 503).
 */
export interface AuthFailure {
  ok: false;
  reason: 'missing' | 'invalid' | 'unavailable';
  /** Says what to send, or which check failed; never repeats the credentials. */
  message: string;
}

export type AuthResult = { ok: true; caller: Caller } | AuthFailure;

/**
 * The request a credential came with, as far as authentication needs it: its logger, with its request id, read only
 * when an unexpected error is logged (a request's child logger is made on first use).
 */
export interface RequestLog {
  readonly logger: Logger;
}

/**
 * How each transport authenticates: API keys answer at once; a JWT (src/auth/jwt.ts) after its verification.
 * `request`: where an unexpected error of a JWT's verification is logged; the gateway's logger without it.
 */
export type Authenticate = (
  authorization: string | string[] | undefined | null,
  request?: RequestLog,
) => AuthResult | Promise<AuthResult>;

/** The JWT half: verifies a token shaped like a JWT (`looks`) that is not an API key. */
export interface JwtCheck {
  looks(token: string): boolean;
  verify(token: string, request?: RequestLog): Promise<AuthResult>;
}

type ConfiguredApps = {
  apiKeys: readonly AppKey[];
  operatorKeys: readonly AppKey[];
  appsFile: readonly AppFileEntry[];
};

/**
 * Every configured key's digest and its caller, built once: a named key is its app (`app:<name>`), a bare key its
 * own app, labelled by `label(key)` (a keyed digest, never the key's plain hash). The configuration refuses a key
 * listed twice (src/config/index.ts checkAppKeys); operator keys come first all the same.
 */
function configuredKeys(
  apps: ConfiguredApps,
  label: (key: string) => string,
): { digests: Buffer[]; callers: Caller[] } {
  const keyed = [
    ...apps.operatorKeys.map((k) => ({ ...k, grants: ALL_GRANTS, via: 'OPERATOR_KEYS' as const })),
    ...apps.apiKeys.map((k) => ({ ...k, grants: APP_GRANTS, via: 'API_KEYS' as const })),
  ];
  const digests = keyed.map((k) => sha256(k.key));
  const callers: Caller[] = keyed.map((k, i) => {
    const scope = k.name === null ? scopeOfKeyDigest(digests[i]!) : scopeOfApp(k.name);
    const app = k.name ?? label(k.key);
    return Object.freeze({ scope, app, grants: k.grants, via: k.via });
  });
  for (const app of apps.appsFile) {
    const caller: Caller = Object.freeze({
      scope: scopeOfApp(app.name),
      app: app.name,
      grants: Grants.of(app.scopes),
      via: 'APPS_FILE',
      ...(app.approves ? { approves: app.approves } : {}),
    });
    for (const digest of app.keyDigests) {
      digests.push(Buffer.from(digest, 'hex'));
      callers.push(caller);
    }
  }
  return { digests, callers };
}

/**
 * The names of the apps configured with keys: GATEWAY_API_KEYS' and OPERATOR_API_KEYS' `<name>:<key>` and the apps
 * file's apps. A bare key's label is no name to record: `*` refuses every name of its shape (KEY_LABEL) already.
 */
export function keyAppNames(apps: ConfiguredApps): string[] {
  return [
    ...[...apps.operatorKeys, ...apps.apiKeys].flatMap((k) => (k.name === null ? [] : [k.name])),
    ...apps.appsFile.map((a) => a.name),
  ];
}

/** The configured apps as the operator's list shows them: name, where configured, scopes, how many keys. */
export function configuredApps(
  apps: ConfiguredApps,
  label: (key: string) => string,
): { name: string; source: AppSource; scopes: Scope[]; keys: number }[] {
  const byName = new Map<string, { name: string; source: AppSource; scopes: Set<Scope>; keys: number }>();
  for (const caller of configuredKeys(apps, label).callers) {
    const entry = byName.get(caller.app!) ?? {
      name: caller.app!,
      source: caller.via!,
      scopes: new Set<Scope>(),
      keys: 0,
    };
    for (const s of caller.grants.scopes) entry.scopes.add(s);
    entry.keys += 1;
    byName.set(entry.name, entry);
  }
  return [...byName.values()].map((e) => ({ ...e, scopes: [...e.scopes].sort() }));
}

/**
 * Checks an app's API key: GATEWAY_API_KEYS (every scope but `operator`, `cloud:approve` and `identity:approve`), OPERATOR_API_KEYS (every scope: an
 * operator's key is also an app's key) or GATEWAY_APPS_FILE (the scopes the file gives; it holds the keys' digests).
 * Keys are held as sha256 digests and compared in constant time; with no keys configured every caller is the
 * one `open` caller. With `jwt` (AUTH_JWKS_URL or AUTH_JWKS_FILE), a bearer token that is no key and looks like a JWT
 * is verified as one; the gateway is then never open, even without keys. An API key is answered without a promise:
 * the key path is the hot one (every benchmark runs with keys) and stays as cheap as before JWTs existed.
 */
export function createAuthenticator(
  apps: ConfiguredApps,
  label: (key: string) => string,
  jwt?: JwtCheck,
): Authenticate {
  const { digests: hashes, callers } = configuredKeys(apps, label);
  const missing: AuthFailure = Object.freeze({
    ok: false,
    reason: 'missing',
    message: jwt
      ? 'a valid API key or JWT is required: send Authorization: Bearer <key or JWT>'
      : 'a valid API key is required: send Authorization: Bearer <key>',
  });
  const invalid: AuthFailure = Object.freeze({ ok: false, reason: 'invalid', message: 'the API key is not valid' });
  const repeated: AuthFailure = Object.freeze({
    ok: false,
    reason: 'invalid',
    message: 'the request has more than one Authorization header: send one',
  });
  return (authorization, request) => {
    if (hashes.length === 0 && !jwt) return { ok: true, caller: OPEN_CALLER };
    if (Array.isArray(authorization) && authorization.length > 1) return repeated;
    const token = bearerToken(authorization);
    if (!token) return missing;
    // One digest per request, compared with every configured one.
    const found = indexOfDigest(sha256(token), hashes);
    if (found >= 0) return { ok: true, caller: callers[found]! };
    return jwt?.looks(token) ? jwt.verify(token, request) : invalid;
  };
}
