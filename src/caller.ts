import { createHash, timingSafeEqual } from 'node:crypto';

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
  /** An OPERATOR_API_KEYS key: may read operator data (the mobile-ID quarantine) beside its own. */
  readonly operator?: boolean;
}

export const OPEN_CALLER: Caller = Object.freeze({ scope: 'open', app: 'open' });

/** An entry of GATEWAY_API_KEYS or OPERATOR_API_KEYS: `name:key`, or a bare key (an app without a name). */
export interface AppKey {
  readonly name: string | null;
  readonly key: string;
}

/** What an app name may be: it appears in metrics labels, logs and `<app>:<token>` bindings. */
export const APP_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

/**
 * `name:key` when the part before the first `:` is an app name, else a bare key. A key that itself holds a `:`
 * after a name-like prefix must be written with a name (`shop:abc:def` is the app `shop` with key `abc:def`).
 */
export function parseAppKey(entry: string): AppKey {
  const colon = entry.indexOf(':');
  if (colon > 0 && colon < entry.length - 1 && APP_NAME.test(entry.slice(0, colon))) return { name: entry.slice(0, colon), key: entry.slice(colon + 1) };
  return { name: null, key: entry };
}

/** The owner scope of a named app. */
export function scopeOfApp(name: string): string {
  return `app:${name}`;
}

export function sha256(text: string): Buffer {
  return createHash('sha256').update(text).digest();
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
