import { hash, timingSafeEqual } from 'node:crypto';

/**
 * The app's identity, a leaf every layer may use: who is calling (the idempotency scope and the owner of
 * what they create) and how API keys and notification tokens are held (sha256 digests, compared in
 * constant time). Transport decides who the caller is (server/auth.ts); domains only carry it.
 */
export interface Caller {
  /**
   * Who owns what the caller creates: `app:<name>` for a named key (GATEWAY_API_KEYS `name:key`: every key of
   * the name is the same app, so a key can be rotated), `key:<first 16 hex of sha256(key)>` for a bare key, or
   * `open` when the gateway runs without keys (sandbox only). Stored with what the caller creates; never a label.
   */
  readonly scope: string;
  /**
   * What metrics and logs call the app: its name, or for a bare key a keyed digest (`key-<12 hex of
   * HMAC(gateway secret, key)>`), from which the key cannot be recovered by trying candidates offline.
   */
  readonly app?: string;
  /**
   * What the app may do (docs/decisions/046): the scopes its key, its GATEWAY_APPS_FILE entry or its JWT grants.
   * The admit stage refuses an operation touching a field whose `@requiresScopes` these do not cover.
   */
  readonly grants: Grants;
  /**
   * When the caller's credentials stop being valid (epoch ms): a JWT's exp. A WebSocket or SSE connection opened with
   * them ends then (src/auth/jwt.ts). Undefined for an API key, which does not expire.
   */
  readonly expiresAt?: number;
  /** How the app signed in, for the operator's list of apps; absent for the open caller and internal reads. */
  readonly via?: AppSource;
  /**
   * For an approver configured in GATEWAY_APPS_FILE with `approves`: the apps whose agents' plans it may approve
   * (src/agents/approvers.ts). Absent: every app's, within its approve scopes.
   */
  readonly approves?: readonly string[];
}

/** Where an app is configured: GATEWAY_API_KEYS, OPERATOR_API_KEYS, GATEWAY_APPS_FILE, or a JWT's claim. */
export type AppSource = 'API_KEYS' | 'OPERATOR_KEYS' | 'APPS_FILE' | 'JWT';

/**
 * The gateway's scopes, one read and one write per upstream, `cloud:approve` and `identity:approve` (approve or
 * decline an agent's plan of cloud creations, of identity checks: `approvePlan`, docs/decisions/060) and `operator` (the quarantine of refused notifications and the list of apps).
 * A write scope does not imply the read one: an app that only creates can be kept from reading what others created.
 */
export const SCOPES = [
  'cloud:read',
  'cloud:write',
  'cloud:approve',
  'identity:read',
  'identity:write',
  'identity:approve',
  'mobile-id:read',
  'mobile-id:write',
  'operator',
] as const;
export type Scope = (typeof SCOPES)[number];

export function isScope(value: string): value is Scope {
  return (SCOPES as readonly string[]).includes(value);
}

/** A set of scopes, interned: one object per distinct set, with a stable key (shared executions group by it). */
export class Grants {
  private static readonly interned = new Map<string, Grants>();
  private static made = 0;
  /** The scopes, sorted, joined by spaces: equal sets have equal keys. */
  readonly key: string;
  /** A short stand-in for `key` within this process: one object per set, so equal sets have equal ids. */
  readonly id: number;
  private readonly set: ReadonlySet<Scope>;

  private constructor(scopes: readonly Scope[]) {
    this.set = new Set(scopes);
    this.key = [...this.set].sort().join(' ');
    this.id = ++Grants.made;
  }

  static of(scopes: Iterable<Scope>): Grants {
    const list = [...new Set(scopes)].sort();
    const key = list.join(' ');
    let grants = Grants.interned.get(key);
    if (!grants) {
      grants = Object.freeze(new Grants(list)) as Grants;
      Grants.interned.set(key, grants);
    }
    return grants;
  }

  has(scope: Scope): boolean {
    return this.set.has(scope);
  }

  get scopes(): readonly Scope[] {
    return [...this.set].sort();
  }
}

/**
 * What a key of GATEWAY_API_KEYS may do: every scope but `operator` and the approve scopes. Approving an agent's plan is
 * a person's or an approver app's act, so it is given by name (GATEWAY_APPS_FILE, a JWT's scope, OPERATOR_API_KEYS).
 */
export const APP_GRANTS = Grants.of(
  SCOPES.filter((s) => s !== 'operator' && s !== 'cloud:approve' && s !== 'identity:approve'),
);
/** What a key of OPERATOR_API_KEYS may do, and everyone on an open (sandbox-only) gateway: every scope. */
export const ALL_GRANTS = Grants.of(SCOPES);
/** Nothing: a caller made up to read as the owner of a record (an internal read), never an app's. */
export const NO_GRANTS = Grants.of([]);

export const OPEN_CALLER: Caller = Object.freeze({ scope: 'open', app: 'open', grants: ALL_GRANTS });

/** The owner `scope` as a caller with no grants, for internal reads on the owner's behalf. */
export function ownerCaller(scope: string): Caller {
  return { scope, grants: NO_GRANTS };
}

/** An entry of GATEWAY_API_KEYS or OPERATOR_API_KEYS: `name:key`, or a bare key (an app without a name). */
export interface AppKey {
  readonly name: string | null;
  readonly key: string;
}

/** What an app name may be: it appears in metrics labels, logs and `<app>:<token>` bindings. */
export const APP_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

/**
 * The form of a bare key's label (`key-` and 12 hex digits of a keyed digest; src/gateway/live.ts). A bare key is its own
 * owner (`key:<16 hex>`): a configured or JWT app that took a name of this form would share its name, and with it
 * approvers' `approves` lists, metrics and logs, with another owner. No such app is accepted.
 */
export const KEY_LABEL = /^key-[0-9a-f]{12}$/;

/** Why a name of KEY_LABEL's form is refused, for the messages that refuse it. */
export const KEY_LABEL_RULE = "a bare key's label (key- and 12 hex digits) is no app's name";

/**
 * `name:key` when the part before the first `:` is an app name, else a bare key. A key that itself holds a `:`
 * after a name-like prefix must be written with a name (`shop:abc:def` is the app `shop` with key `abc:def`).
 */
export function parseAppKey(entry: string): AppKey {
  const colon = entry.indexOf(':');
  if (colon > 0 && colon < entry.length - 1 && APP_NAME.test(entry.slice(0, colon)))
    return { name: entry.slice(0, colon), key: entry.slice(colon + 1) };
  return { name: null, key: entry };
}

/**
 * The owner scope of a named app. Owner scopes are `open`, `app:<APP_NAME>` or `key:<16 hex>`: after its fixed prefix
 * none holds a `:`, `@`, `/` or NUL, so every compound key that joins an owner and another value with one of them
 * (`mobile-id@<owner>:<auth_req_id>`, `verification@<owner>:<externalId>:<digest>`, `<owner>/<idempotencyKey>`,
 * `<owner>\0<key>`) splits one way only, and keys stored before keep their form. A name outside APP_NAME (a JWT
 * claim such as `victim:x123`) would make two owners' keys meet, so it is refused here whatever the caller checked.
 */
export function scopeOfApp(name: string): string {
  if (!APP_NAME.test(name)) throw new Error('an app name must match APP_NAME (the value is not shown)');
  return `app:${name}`;
}

export function sha256(text: string): Buffer {
  // Asked as latin1 text (a byte per character): `crypto.hash` gives a Buffer ~1 µs slower (decision 153).
  return Buffer.from(hash('sha256', text, 'binary'), 'latin1');
}

/** The owner scope of a bare API key, from its sha256 digest. */
export function scopeOfKeyDigest(digest: Buffer): string {
  return `key:${digest.toString('hex', 0, 8)}`;
}

/** The index of `digest` in `hashes`, or -1; every entry is compared, in constant time. */
export function indexOfDigest(digest: Buffer, hashes: readonly Buffer[]): number {
  let found = -1;
  for (let i = 0; i < hashes.length; i += 1) if (timingSafeEqual(digest, hashes[i]!) && found < 0) found = i;
  return found;
}
