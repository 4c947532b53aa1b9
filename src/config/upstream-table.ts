// The table of upstreams (docs/decisions/008): which upstreams are real and which the embedded simulator serves,
// resolved once from the environment by src/config/index.ts and read by the composition root.
import { parseAppKey, scopeOfApp } from '../auth/caller.js';
import { ConfigError, shownUrl } from '../errors.js';

export { ConfigError } from '../errors.js';

/** The upstreams, as SANDBOX_UPSTREAMS and the start-up line name them. */
export const UPSTREAM_NAMES = ['cloud', 'identification', 'verification', 'rfm', 'mobile-id'] as const;
export type UpstreamName = (typeof UPSTREAM_NAMES)[number];

/** Upstreams whose spec does not document Idempotency-Key; IDEMPOTENT_UPSTREAMS may name them. */
export const KEY_OPTIONAL_UPSTREAMS = ['identification', 'verification', 'rfm'] as const;

/** A client_notification_token the operator configured, and the app whose results it carries (null: every app's). */
export interface ConfiguredNotificationToken {
  readonly token: string;
  /** The owner scope of the app it is bound to (`app:<name>`), or null for a token shared by every app. */
  readonly scope: string | null;
}

/**
 * The apps a notification token may be bound to: those named by keys (GATEWAY_API_KEYS, OPERATOR_API_KEYS,
 * GATEWAY_APPS_FILE) or by an identity provider's apps (AUTH_APPS, AUTH_ISSUERS); `anyName` when a provider accepts
 * `*` (any app name may sign in).
 */
export interface AppNames {
  readonly names: ReadonlySet<string>;
  readonly anyName: boolean;
}

/**
 * MOBILEID_NOTIFICATION_TOKENS entries: `<app>:<token>` binds a token to a named app of GATEWAY_API_KEYS,
 * OPERATOR_API_KEYS, GATEWAY_APPS_FILE or of the JWT apps (its notifications are that app's alone); a bare token is shared by every app. An entry
 * whose prefix looks like an app name but names no configured app stops start-up: a typo must not silently
 * turn an app's token into one every app reads.
 */
function bindNotificationTokens(entries: readonly string[], apps: AppNames): ConfiguredNotificationToken[] {
  const names = apps.names;
  /** Each token's entry: a token listed twice would belong to whichever entry a lookup meets first. */
  const seen = new Map<string, number>();
  return entries.map((entry, i) => {
    const parsed = parseAppKey(entry);
    const token = parsed.name === null ? entry : parsed.key;
    const first = seen.get(token);
    if (first !== undefined)
      throw new ConfigError(
        'MOBILEID_NOTIFICATION_TOKENS',
        `entries ${first + 1} and ${i + 1} list the same token: a token belongs to one app, or is shared by all`,
      );
    seen.set(token, i);
    if (parsed.name === null) return { token: entry, scope: null };
    if (!names.has(parsed.name) && !apps.anyName) {
      const known = names.size
        ? `the named apps are ${[...names].sort().join(', ')}`
        : 'no app is named (write name:key in GATEWAY_API_KEYS, use GATEWAY_APPS_FILE, or list the JWT app in AUTH_APPS or AUTH_ISSUERS)';
      throw new ConfigError(
        'MOBILEID_NOTIFICATION_TOKENS',
        `entry ${i + 1} binds a token to the app ${JSON.stringify(parsed.name)}, which no configured app is called; ${known}`,
      );
    }
    return { token: parsed.key, scope: scopeOfApp(parsed.name) };
  });
}

/** What the table is resolved from: the parsed variables it reads (src/config/index.ts). */
export interface UpstreamEnv {
  readonly CLOUD_API_URL?: string | undefined;
  readonly CLOUD_API_TOKEN?: string | undefined;
  readonly CLOUD_API_CREDENTIALS?: Readonly<Record<string, unknown>> | undefined;
  readonly IDENTIFICATION_API_URL?: string | undefined;
  readonly IDENTIFICATION_API_TOKEN?: string | undefined;
  readonly IDENTIFICATION_PRODLIKE_API_URL?: string | undefined;
  readonly IDENTIFICATION_PRODLIKE_API_TOKEN?: string | undefined;
  readonly VERIFICATION_API_URL?: string | undefined;
  readonly VERIFICATION_API_TOKEN?: string | undefined;
  readonly RFM_API_URL?: string | undefined;
  readonly MOBILEID_NOTIFICATION_TOKENS: readonly string[];
  readonly MOBILEID_JWKS_URL?: string | undefined;
  readonly MOBILEID_JWKS_FILE?: string | undefined;
  readonly MOBILEID_ISSUER?: string | undefined;
  readonly MOBILEID_CLIENT_ID?: string | undefined;
  readonly SANDBOX_UPSTREAMS: readonly string[];
}

/** A table entry the embedded simulator serves. */
export interface Sandboxed {
  readonly sandbox: true;
}

export interface RealCloud {
  readonly sandbox: false;
  readonly url: string;
  readonly auth: { readonly token: string } | { readonly credentials: Readonly<Record<string, unknown>> };
}

export interface RealIdentification {
  readonly sandbox: false;
  readonly url: string;
  readonly token: string;
  /** The PRODLIKE environment; null when IDENTIFICATION_PRODLIKE_API_URL is unset (PRODLIKE is then refused). */
  readonly prodlike: { readonly url: string; readonly token: string } | null;
}

export interface RealVerification {
  readonly sandbox: false;
  readonly url: string;
  readonly token: string;
}

export interface RealRfm {
  readonly sandbox: false;
  readonly url: string;
  readonly token: string;
  /** The name of the variable the address came from: RFM_API_URL, or VERIFICATION_API_URL by the spec's default. */
  readonly from: 'RFM_API_URL' | 'VERIFICATION_API_URL';
}

export interface RealMobileId {
  readonly sandbox: false;
  /** MOBILEID_NOTIFICATION_TOKENS: each `<app>:<token>` bound to a named app, or a bare token (shared). */
  readonly notificationTokens: readonly ConfiguredNotificationToken[];
  readonly jwksUrl: string | undefined;
  readonly jwksFile: string | undefined;
  readonly issuer: string | undefined;
  readonly clientId: string | undefined;
}

export interface UpstreamTable {
  readonly cloud: RealCloud | Sandboxed;
  readonly identification: RealIdentification | Sandboxed;
  readonly verification: RealVerification | Sandboxed;
  readonly rfm: RealRfm | Sandboxed;
  readonly mobileId: RealMobileId | Sandboxed;
}

export function everyUpstreamSandboxed(table: UpstreamTable): boolean {
  return Object.values(table).every((u: { sandbox: boolean }) => u.sandbox);
}

/** `name=sandbox` or `name=<address>` per upstream, for the start-up line (no credentials: user info is cut). */
export function describeUpstreams(table: UpstreamTable): Record<UpstreamName, string> {
  const address = shownUrl;
  return {
    cloud: table.cloud.sandbox ? 'sandbox' : address(table.cloud.url),
    identification: table.identification.sandbox ? 'sandbox' : address(table.identification.url),
    verification: table.verification.sandbox ? 'sandbox' : address(table.verification.url),
    rfm: table.rfm.sandbox
      ? 'sandbox'
      : `${address(table.rfm.url)}${table.rfm.from === 'VERIFICATION_API_URL' ? ' (default: VERIFICATION_API_URL, spec: rfm under the verification interface /api/v1)' : ''}`,
    'mobile-id': table.mobileId.sandbox ? 'sandbox' : 'real',
  };
}

const SANDBOX_ONE = (name: UpstreamName) =>
  `or name ${name} in SANDBOX_UPSTREAMS to have the embedded simulator serve it`;

/**
 * Which upstreams are real and which the simulator serves. The simulator serves an upstream only when no
 * upstream is configured at all, or when SANDBOX_UPSTREAMS names it: a deployment with real upstreams never
 * gets a simulated answer because one variable was forgotten. A real address needs its credentials.
 */
export function resolveUpstreams(e: UpstreamEnv, appNames: AppNames): UpstreamTable {
  const configured: Record<UpstreamName, boolean> = {
    cloud: !!e.CLOUD_API_URL,
    identification: !!e.IDENTIFICATION_API_URL,
    verification: !!e.VERIFICATION_API_URL,
    rfm: !!e.RFM_API_URL,
    'mobile-id': e.MOBILEID_NOTIFICATION_TOKENS.length > 0 || !!e.MOBILEID_JWKS_URL || !!e.MOBILEID_JWKS_FILE,
  };
  const listed = new Set<string>(e.SANDBOX_UPSTREAMS);
  const variableOf: Record<UpstreamName, string> = {
    cloud: 'CLOUD_API_URL',
    identification: 'IDENTIFICATION_API_URL',
    verification: 'VERIFICATION_API_URL',
    rfm: 'RFM_API_URL',
    'mobile-id': 'MOBILEID_NOTIFICATION_TOKENS',
  };
  for (const name of UPSTREAM_NAMES) {
    if (listed.has(name) && configured[name]) {
      throw new ConfigError(
        'SANDBOX_UPSTREAMS',
        `names ${name}, which ${variableOf[name]} configures as real: set one or the other`,
      );
    }
  }
  const allSandboxed = UPSTREAM_NAMES.every((n) => !configured[n]);
  const sandboxed = (name: UpstreamName) => allSandboxed || listed.has(name);
  const SANDBOX: Sandboxed = { sandbox: true };

  const missing = (name: UpstreamName, what: string) =>
    new ConfigError(variableOf[name], `is required: other upstreams are real, so set ${what}, ${SANDBOX_ONE(name)}`);

  let cloud: RealCloud | Sandboxed = SANDBOX;
  if (e.CLOUD_API_URL) {
    cloud = {
      sandbox: false,
      url: e.CLOUD_API_URL,
      auth: e.CLOUD_API_TOKEN ? { token: e.CLOUD_API_TOKEN } : { credentials: e.CLOUD_API_CREDENTIALS! },
    };
  } else if (!sandboxed('cloud'))
    throw missing('cloud', 'the cloud API address with CLOUD_API_TOKEN or CLOUD_API_CREDENTIALS');

  let identification: RealIdentification | Sandboxed = SANDBOX;
  if (e.IDENTIFICATION_API_URL) {
    if (!e.IDENTIFICATION_API_TOKEN) {
      throw new ConfigError(
        'IDENTIFICATION_API_TOKEN',
        'IDENTIFICATION_API_URL is set, so IDENTIFICATION_API_TOKEN is required (the identification interface answers 401 without it)',
      );
    }
    identification = {
      sandbox: false,
      url: e.IDENTIFICATION_API_URL,
      token: e.IDENTIFICATION_API_TOKEN,
      prodlike: e.IDENTIFICATION_PRODLIKE_API_URL
        ? {
            url: e.IDENTIFICATION_PRODLIKE_API_URL,
            token: e.IDENTIFICATION_PRODLIKE_API_TOKEN ?? e.IDENTIFICATION_API_TOKEN,
          }
        : null,
    };
  } else if (!sandboxed('identification'))
    throw missing('identification', 'the identification interface address with IDENTIFICATION_API_TOKEN');

  let verification: RealVerification | Sandboxed = SANDBOX;
  if (e.VERIFICATION_API_URL) {
    if (!e.VERIFICATION_API_TOKEN) {
      throw new ConfigError(
        'VERIFICATION_API_TOKEN',
        'VERIFICATION_API_URL is set, so VERIFICATION_API_TOKEN (the JWT of the verification interface) is required',
      );
    }
    verification = {
      sandbox: false,
      url: e.VERIFICATION_API_URL,
      token: e.VERIFICATION_API_TOKEN,
    };
  } else if (!sandboxed('verification'))
    throw missing('verification', 'the verification interface address with VERIFICATION_API_TOKEN');

  // The spec lists the rfm check among the verification interface's endpoints (under /api/v1) and gives it
  // no address of its own: unset, it is the verification interface's, real or simulated alike.
  let rfm: RealRfm | Sandboxed = SANDBOX;
  if (e.RFM_API_URL) {
    if (!e.VERIFICATION_API_TOKEN) {
      throw new ConfigError(
        'VERIFICATION_API_TOKEN',
        'RFM_API_URL is set, so VERIFICATION_API_TOKEN (the JWT the rfm check uses) is required',
      );
    }
    rfm = {
      sandbox: false,
      url: e.RFM_API_URL,
      token: e.VERIFICATION_API_TOKEN,
      from: 'RFM_API_URL',
    };
  } else if (!listed.has('rfm') && !verification.sandbox) {
    rfm = {
      sandbox: false,
      url: verification.url,
      token: verification.token,
      from: 'VERIFICATION_API_URL',
    };
  }

  let mobileId: RealMobileId | Sandboxed = SANDBOX;
  if (configured['mobile-id']) {
    mobileId = {
      sandbox: false,
      notificationTokens: bindNotificationTokens(e.MOBILEID_NOTIFICATION_TOKENS, appNames),
      jwksUrl: e.MOBILEID_JWKS_URL,
      jwksFile: e.MOBILEID_JWKS_FILE,
      issuer: e.MOBILEID_ISSUER,
      clientId: e.MOBILEID_CLIENT_ID,
    };
  } else if (!sandboxed('mobile-id')) {
    throw missing(
      'mobile-id',
      'the client_notification_token values the mobile identity service sends (MOBILEID_NOTIFICATION_TOKENS, or MOBILEID_JWKS_URL/MOBILEID_JWKS_FILE)',
    );
  }

  return { cloud, identification, verification, rfm, mobileId };
}
