// The mobile identity service's JWKS from MOBILEID_JWKS_URL: fetched, cached, fetched again for a kid it lacks, and
// while it cannot be fetched, tried again on one backoff schedule for the whole gateway, whatever asks for it (every
// notification and every pending row would otherwise each start a fetch: docs/decisions/052).
import { createLocalJWKSet, errors, type FlattenedJWSInput, type JSONWebKeySet, type JWSHeaderParameters } from 'jose';

import {
  fetchJwks,
  jwksFailure,
  keyOf,
  shownKid,
  unusableKeyOf,
  usableKeys,
  type UnusableKey,
} from '../auth/jwks-fetch.js';
import { shownUrl } from '../errors.js';
import type { Logger } from '../logger.js';

/** After a successful fetch, a kid the keys lack starts another fetch at most this often (a key rotated in). */
const JWKS_COOLDOWN_MS = 30_000;
/** Keys older than this are fetched again; they keep answering meanwhile, and while the JWKS is down. */
const JWKS_MAX_AGE_MS = 60 * 60_000;
const JWKS_FIRST_RETRY_MS = 5_000;
const JWKS_MAX_RETRY_MS = 60_000;

/** The wait after the `failures`-th failed fetch in a row before the next may start: 5 s, 10 s, 20 s, 40 s, then every 60 s. */
function jwksRetryDelay(failures: number): number {
  return Math.min(JWKS_FIRST_RETRY_MS * 2 ** Math.min(Math.max(failures - 1, 0), 20), JWKS_MAX_RETRY_MS);
}

/** The keys could not be fetched (and none that match are cached): the gateway's side is at fault, not the sender's. */
export class JwksUnavailableError extends Error {}

interface RemoteJwksOptions {
  url: string;
  logger?: Logger | undefined;
  /** Called once per fetch with its outcome (the metric). */
  onFetch?: ((outcome: 'ok' | 'failed') => void) | undefined;
}

export class RemoteJwks {
  private local: ReturnType<typeof createLocalJWKSet> | null = null;
  /** When keys were last fetched (epoch ms). */
  private fetchedAt = -Infinity;
  /** When the last fetch started, and the earliest time the next may. */
  private attemptedAt = -Infinity;
  private nextAttemptAt = -Infinity;
  /** Failed fetches in a row; the reason of the last one. */
  private failures = 0;
  private failure: string | null = null;
  private pending: Promise<void> | null = null;
  /** The signing keys of the last fetched JWKS that cannot be used (src/auth/jwks-fetch.ts usableKeys). */
  private unusable: readonly UnusableKey[] = [];

  constructor(private readonly options: RemoteJwksOptions) {}

  /**
   * jose's key lookup, at `now` (epoch ms; a deferred pass gives its own time). With no keys yet, it waits for a fetch
   * when the schedule allows one, and otherwise fails at once. Keys older than their max age are fetched again in the
   * background while they keep answering. A kid they lack waits for a fetch when one may start (or is running).
   */
  async getKey(header: JWSHeaderParameters, token: FlattenedJWSInput, now = Date.now()): Promise<CryptoKey> {
    if (this.local === null || now - this.fetchedAt >= JWKS_MAX_AGE_MS) {
      const fetching = this.fetch(now);
      if (this.local === null && fetching) await fetching;
    }
    if (this.local === null)
      throw new JwksUnavailableError(
        `${shownUrl(this.options.url)} could not be fetched (${this.failure ?? 'not fetched yet'}); it is tried again with backoff`,
      );
    try {
      return await this.lookUp(header, token);
    } catch (err) {
      if (!(err instanceof errors.JWKSNoMatchingKey)) throw err;
      const fetching = this.fetch(now);
      if (fetching) {
        await fetching;
        try {
          return await this.lookUp(header, token);
        } catch (again) {
          if (!(again instanceof errors.JWKSNoMatchingKey)) throw again;
        }
      }
      // The gateway could not look for the kid: its side's trouble, not the token's.
      if (this.failure !== null)
        throw new JwksUnavailableError(
          `no cached key matches the id_token's kid, and ${shownUrl(this.options.url)} could not be fetched again (${this.failure})`,
        );
      // The service published the kid with a key the gateway cannot use: its JWKS's trouble (warned at the fetch).
      const unusable = unusableKeyOf(this.unusable, header.kid);
      if (unusable) throw this.unusableKey(header.kid, unusable.reason);
      throw err;
    }
  }

  /** The key jose finds in the fetched set (auth/jwks-fetch.ts keyOf): a key it cannot import is the JWKS's fault. */
  private lookUp(header: JWSHeaderParameters, token: FlattenedJWSInput): Promise<CryptoKey> {
    return keyOf(this.local!, header, token, (kid, reason, err) => {
      this.warnUnusable(kid, reason, err);
      return this.unusableKey(kid, reason);
    });
  }

  private unusableKey(kid: unknown, reason: string): JwksUnavailableError {
    return new JwksUnavailableError(
      `${shownUrl(this.options.url)} holds no usable key of the id_token's kid ${shownKid(kid)}: ${reason}`,
    );
  }

  private warnUnusable(kid: unknown, reason: string, err?: string): void {
    this.options.logger?.warn(
      { jwks: shownUrl(this.options.url), kid: kid ?? null, reason, ...(err === undefined ? {} : { err }) },
      'a key of the mobile identity service JWKS cannot be used: id_tokens that name its kid are kept pending verification',
    );
  }

  /** The running fetch, or a new one when the schedule allows it at `now`; null when it does not. */
  private fetch(now: number): Promise<void> | null {
    if (this.pending) return this.pending;
    // A clock that went back (a test, an NTP step) must not hold the schedule for that long.
    if (now < this.nextAttemptAt && now >= this.attemptedAt) return null;
    this.attemptedAt = now;
    this.pending = this.load(now).finally(() => (this.pending = null));
    return this.pending;
  }

  private async load(now: number): Promise<void> {
    try {
      const { usable, unusable } = usableKeys(await fetchJwks(this.options.url));
      this.local = createLocalJWKSet(usable);
      this.unusable = unusable;
      for (const key of unusable) this.warnUnusable(key.kid, key.reason);
      this.fetchedAt = now;
      this.failures = 0;
      this.failure = null;
      this.nextAttemptAt = now + JWKS_COOLDOWN_MS;
      this.options.onFetch?.('ok');
    } catch (err) {
      this.failures += 1;
      // The failure is named in JwksUnavailableError, which apps read (the quarantine): a bug's words go to the log.
      this.failure = jwksFailure(err, this.options.url, this.options.logger, 'the mobile identity service');
      this.nextAttemptAt = now + jwksRetryDelay(this.failures);
      this.options.onFetch?.('failed');
      this.options.logger?.warn(
        {
          jwks: shownUrl(this.options.url),
          reason: this.failure,
          failures: this.failures,
          retryInMs: jwksRetryDelay(this.failures),
          cached: this.local !== null,
        },
        'the mobile identity service JWKS could not be fetched: tried again with backoff; keys fetched before (if any) keep working',
      );
    }
  }
}
