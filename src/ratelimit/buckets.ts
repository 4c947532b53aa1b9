import { CompiledQuery, type Kysely } from 'kysely';
import {
  RateLimiterMemory,
  RateLimiterPostgres,
  RateLimiterRes,
  type RateLimiterAbstract,
} from 'rate-limiter-flexible';

import type { Caller } from '../auth/caller.js';
import type { RateLimit } from '../config/index.js';
import { ErrorCode, GatewayError } from '../errors.js';
import type { Logger } from '../logger.js';
import type { Metrics } from '../metrics.js';
import type { Store } from '../store/index.js';

/** The two budgets of an API key: creations spend the cloud account's paid quota, reads do not. */
export type Bucket = 'creations' | 'reads';

export const TABLE = 'rate_limits';

/** RATE_LIMITED with the seconds to wait, in `extensions.retryAfter` (the HTTP layer adds `Retry-After`). */
export class RateLimitedError extends GatewayError {
  constructor(
    readonly bucket: Bucket,
    readonly retryAfterSeconds: number,
    limit: RateLimit,
  ) {
    super(
      ErrorCode.RATE_LIMITED,
      `rate limit of ${bucket} for this API key reached (${limit.points} per ${limit.windowMs / 1000} s); retry after ${retryAfterSeconds} s`,
      { bucket, retryAfter: retryAfterSeconds, limit: limit.points, windowSeconds: limit.windowMs / 1000 },
    );
  }
}

/**
 * rate-limiter-flexible's PostgreSQL limiter speaks to a node-postgres-like client (`query({ text, values })`
 * answering `{ rows, rowCount }`). This adapter runs its statements through the store's own Kysely, so the
 * limits use the gateway's pool, its error handling and its statement count.
 */
function kyselyClient(db: Kysely<unknown>) {
  return {
    async query(q: { text: string; values?: unknown[] }) {
      const result = await db.executeQuery(CompiledQuery.raw(q.text, q.values ?? []));
      return { rows: result.rows, rowCount: result.rows.length || Number(result.numAffectedRows ?? 0n) };
    },
  };
}

/**
 * Per-API-key budgets (docs/decisions/023): one rate-limiter-flexible limiter per bucket, keyed by the
 * caller's scope (a hash of the key, never the key). On PostgreSQL the counters live in the shared
 * database, so every replica spends from the same budget; on SQLite (one process) they live in memory.
 */
export class RateLimits {
  /**
   * Per bucket and scope, when the window this replica saw spent ends. Only a hint: points given back on any replica
   * are free on every replica, so a marked key reads the shared count (a read, which spends nothing) before it is
   * refused, and such a refusal adds nothing to the count that refunds take back from. A refusal by the limiter's own
   * consume (the key not marked here yet) counts its points in the window, as decision 023 says.
   */
  private readonly spent = new Map<string, number>();

  private constructor(
    private readonly limiters: Readonly<Record<Bucket, { limiter: RateLimiterAbstract; limit: RateLimit } | null>>,
    private readonly metrics: Metrics,
    private readonly logger: Logger,
  ) {}

  static async create(options: {
    limits: Readonly<Record<Bucket, RateLimit | null>>;
    store: Pick<Store, 'db' | 'dialect'>;
    metrics: Metrics;
    logger: Logger;
  }): Promise<RateLimits> {
    const { limits, store } = options;
    let tableCreated = false;
    const make = async (bucket: Bucket): Promise<{ limiter: RateLimiterAbstract; limit: RateLimit } | null> => {
      const limit = limits[bucket];
      if (!limit) return null;
      const base = { keyPrefix: bucket, points: limit.points, duration: limit.windowMs / 1000 };
      // A store that cannot answer must not stop every app: each replica then limits on its own. In memory: one
      // counter per API key (scope) and bucket, dropped when its window ends.
      const memory = new RateLimiterMemory(base);
      if (store.dialect !== 'postgres') return { limiter: memory, limit };
      let ready!: (err?: Error) => void;
      const created = new Promise<void>((resolve, reject) => {
        ready = (err) => (err ? reject(err) : resolve());
      });
      const limiter = new RateLimiterPostgres(
        {
          ...base,
          storeClient: kyselyClient(store.db as Kysely<unknown>),
          storeType: 'client',
          tableName: TABLE,
          // The first limiter creates the table (CREATE TABLE IF NOT EXISTS); the second reuses it.
          tableCreated,
          // Expired rows are purged by purgeExpired() on the gateway's own timer, which stops on close.
          clearExpiredByTimeout: false,
          insuranceLimiter: memory,
        },
        // Called once the table exists (at once, from the constructor, when it is known to exist).
        (err?: Error) => ready(err),
      );
      await created;
      tableCreated = true;
      return { limiter, limit };
    };
    const creations = await make('creations');
    const reads = await make('reads');
    return new RateLimits({ creations, reads }, options.metrics, options.logger);
  }

  /** True when the bucket has a limit (a fast path: no bucket, no work). */
  limited(bucket: Bucket): boolean {
    return this.limiters[bucket] !== null;
  }

  /** Spends `points` of the caller's bucket, or throws RateLimitedError when the window's budget is spent. */
  async take(caller: Caller, bucket: Bucket, points = 1): Promise<void> {
    await this.consume(caller, bucket, points);
  }

  /**
   * take, for a write that may still be refused once its points are spent (an agent's plan past its app's bound of
   * open plans, checked as it is stored): resolves to the refund that gives them back, since a refusal spends nothing.
   */
  async charge(caller: Caller, bucket: Bucket, points = 1): Promise<() => Promise<void>> {
    const taken = await this.consume(caller, bucket, points);
    if (!taken) return async () => {};
    const windowEnds = Date.now() + taken.msBeforeNext;
    return () => this.refund(caller, bucket, points, windowEnds);
  }

  /** The limiter's answer when `points` were spent; null when nothing was counted (no limit, or the limiter failed). */
  private async consume(caller: Caller, bucket: Bucket, points: number): Promise<RateLimiterRes | null> {
    const entry = this.limiters[bucket];
    if (!entry || points <= 0) return null;
    // The bucket is the owner's (every key of a named app shares it); the label is the app's name, never a key hash.
    const app = caller.app ?? 'internal';
    try {
      // A key this replica saw spend its window: the shared count decides (points given back elsewhere are free).
      if (this.spent.size > 0) {
        const mark = `${bucket}:${caller.scope}`;
        const until = this.spent.get(mark);
        if (until !== undefined) {
          if (Date.now() < until) {
            const current = await entry.limiter.get(caller.scope);
            if (current && current.consumedPoints + points > entry.limit.points)
              this.refused(caller, app, bucket, points, current.msBeforeNext);
          }
          this.spent.delete(mark);
        }
      }
      const res = await entry.limiter.consume(caller.scope, points);
      if (res.remainingPoints <= 0) this.spent.set(`${bucket}:${caller.scope}`, Date.now() + res.msBeforeNext);
      this.metrics.rateLimitDecisions.inc({ app, bucket, outcome: 'allowed' }, points);
      this.metrics.rateLimitRemaining.set({ app, bucket }, res.remainingPoints);
      return res;
    } catch (err) {
      if (err instanceof RateLimitedError) throw err;
      if (!(err instanceof RateLimiterRes)) {
        // The insurance limiter answers when the store fails; reaching here means both failed.
        this.logger.error({ err, bucket }, 'rate limiter failed; the request is let through');
        return null;
      }
      return this.refused(caller, app, bucket, points, err.msBeforeNext);
    }
  }

  /** Refuses `caller` (RATE_LIMITED), marking the key's window as spent on this replica until it ends. */
  private refused(caller: Caller, app: string, bucket: Bucket, points: number, msBeforeNext: number): never {
    const entry = this.limiters[bucket]!;
    this.spent.set(`${bucket}:${caller.scope}`, Date.now() + msBeforeNext);
    this.metrics.rateLimitDecisions.inc({ app, bucket, outcome: 'refused' }, points);
    this.metrics.rateLimitRemaining.set({ app, bucket }, 0);
    throw new RateLimitedError(bucket, Math.max(1, Math.ceil(msBeforeNext / 1000)), entry.limit);
  }

  /**
   * Gives back `points` spent in the window that ends at `windowEnds` (as AppStorage's charges give back that
   * minute's count): once it has ended there is nothing to give back, and a reward would start the next window below
   * zero, a point the app never had.
   */
  private async refund(caller: Caller, bucket: Bucket, points: number, windowEnds: number): Promise<void> {
    const entry = this.limiters[bucket]!;
    if (Date.now() >= windowEnds) return;
    const app = caller.app ?? 'internal';
    try {
      const res = await entry.limiter.reward(caller.scope, points);
      // The other replicas' marks of this key read the shared count at their next request.
      this.spent.delete(`${bucket}:${caller.scope}`);
      this.metrics.rateLimitDecisions.inc({ app, bucket, outcome: 'refunded' }, points);
      this.metrics.rateLimitRemaining.set({ app, bucket }, res.remainingPoints);
    } catch (err) {
      this.logger.error({ err, bucket }, 'rate limiter failed to give points back; they stay spent');
    }
  }

  /** Deletes counters whose window ended over an hour ago (PostgreSQL; memory limiters expire on their own). */
  async purgeExpired(): Promise<void> {
    for (const entry of Object.values(this.limiters)) {
      // clearExpired is in the library's JavaScript (it runs it on its own timer) but not in its typings.
      if (entry?.limiter instanceof RateLimiterPostgres)
        await (entry.limiter as unknown as { clearExpired(before: number): Promise<void> }).clearExpired(
          Date.now() - 3_600_000,
        );
    }
  }
}
