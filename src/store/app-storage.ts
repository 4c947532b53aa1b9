// Per-app bounds on what an app's own credentials can make the gateway store (docs/decisions/051): the webhook
// events (mobile-ID notifications on its tokens, callbacks to its addresses), its live notification tokens and its
// identification callback addresses, each per minute and in total. Counters in memory, never a scan per request.
import { sql, type Kysely } from 'kysely';

import { ErrorCode, GatewayError } from '../errors.js';
import type { Metrics } from '../metrics.js';
import type { Database } from './schema.js';

/** What is bounded per app. */
export type StorageKind = 'events' | 'notification-tokens' | 'callback-addresses';

/**
 * Which bound refused: rows or bytes in the current minute, or rows or bytes stored in all. Bytes are characters of the
 * stored JSON (payload and meta), which is ASCII once sealed.
 */
export type StorageBoundName = 'rows-per-minute' | 'bytes-per-minute' | 'rows' | 'bytes';

export interface StorageLimit {
  /** Rows per minute and per process (per replica); 0: no limit. */
  readonly perMinute: number;
  /** Rows stored at once, across replicas (see `resync`); 0: no limit. */
  readonly total: number;
  /** Characters per minute (events only); 0: no limit. */
  readonly charsPerMinute?: number;
  /** Characters stored at once (events only); 0: no limit. */
  readonly totalChars?: number;
}

export type StorageLimits = Readonly<Record<StorageKind, StorageLimit>>;

/** The variable that sets each bound, for the operator's message. */
const VARIABLES: Record<StorageKind, Record<StorageBoundName, string>> = {
  events: {
    'rows-per-minute': 'APP_EVENTS_PER_MINUTE',
    'bytes-per-minute': 'APP_EVENT_BYTES_PER_MINUTE',
    rows: 'APP_EVENTS_STORED',
    bytes: 'APP_EVENT_BYTES_STORED',
  },
  'notification-tokens': {
    'rows-per-minute': 'APP_NOTIFICATION_TOKENS_PER_MINUTE',
    'bytes-per-minute': '',
    rows: 'APP_NOTIFICATION_TOKENS',
    bytes: '',
  },
  'callback-addresses': {
    'rows-per-minute': 'APP_CALLBACK_ADDRESSES_PER_MINUTE',
    'bytes-per-minute': '',
    rows: 'APP_CALLBACK_ADDRESSES',
    bytes: '',
  },
};

const NOUNS: Record<StorageKind, string> = {
  events: 'webhook events',
  'notification-tokens': 'live notification tokens',
  'callback-addresses': 'callback addresses',
};

export interface StorageRefusal {
  readonly kind: StorageKind;
  /** The owner refused. */
  readonly scope: string;
  readonly bound: StorageBoundName;
  readonly limit: number;
  readonly variable: string;
  /** Names the bound and its variable, never the app's data. */
  readonly description: string;
}

/**
 * A write past a storage bound: RATE_LIMITED for a GraphQL call (`extensions.bound`, `limit`, `variable`); a webhook
 * catches it and answers 429 with `refusal.description`.
 */
export class StorageBoundError extends GatewayError {
  constructor(readonly refusal: StorageRefusal) {
    super(ErrorCode.RATE_LIMITED, refusal.description, {
      bound: `${refusal.kind}:${refusal.bound}`,
      limit: refusal.limit,
      variable: refusal.variable,
    });
  }
}

interface Usage {
  windowStart: number;
  windowRows: number;
  windowChars: number;
  rows: number;
  chars: number;
}

const MINUTE = 60_000;

/** Where each kind's rows are counted from, per owner (the start-up seed and the periodic resync). */
export interface StorageSources {
  /** Event kinds written by webhooks on an app's credentials (mobile-id, verification, identification). */
  readonly webhookEventKinds: readonly string[];
}

/**
 * The per-app storage bounds. `take` is called before a row is written and counts it (or refuses it); `release`
 * gives back what was not written after all, or what a purge removed. The per-minute counts are this process's;
 * the totals start from the database (`resync`, at start and then periodically on PostgreSQL, where other replicas
 * write too) and follow this process's writes and purges in between.
 */
export class AppStorage {
  private readonly usage: Record<StorageKind, Map<string, Usage>> = {
    events: new Map(),
    'notification-tokens': new Map(),
    'callback-addresses': new Map(),
  };

  constructor(
    private readonly limits: StorageLimits,
    private readonly metrics: Metrics,
    /** The app label of an owner scope in metrics (its name, never a key digest of the scope). */
    private readonly label: (scope: string) => string,
    /** The gateway's clock (GatewayTesting.clock): the minutes of the per-minute bounds and the live tokens' expiry. */
    readonly now: () => number = () => Date.now(),
  ) {
    metrics.countAppStorage(() => this.snapshot());
  }

  /**
   * Counts one row of `chars` characters for `scope`, or refuses it: nothing is counted then, and the caller that
   * does refuse the write calls `refused` (a repeat of what is stored is not refused, whatever the bound).
   */
  take(kind: StorageKind, scope: string, chars = 0, now = this.now()): StorageRefusal | null {
    const limit = this.limits[kind];
    const u = this.of(kind, scope);
    if (now - u.windowStart >= MINUTE) {
      u.windowStart = now;
      u.windowRows = 0;
      u.windowChars = 0;
    }
    const over: [StorageBoundName, number] | null =
      limit.perMinute > 0 && u.windowRows + 1 > limit.perMinute
        ? ['rows-per-minute', limit.perMinute]
        : limit.charsPerMinute && u.windowChars + chars > limit.charsPerMinute
          ? ['bytes-per-minute', limit.charsPerMinute]
          : limit.total > 0 && u.rows + 1 > limit.total
            ? ['rows', limit.total]
            : limit.totalChars && u.chars + chars > limit.totalChars
              ? ['bytes', limit.totalChars]
              : null;
    if (over) {
      const [bound, max] = over;
      const variable = VARIABLES[kind][bound];
      const what =
        bound === 'rows-per-minute'
          ? `${max} ${NOUNS[kind]} a minute`
          : bound === 'bytes-per-minute'
            ? `${max} bytes of ${NOUNS[kind]} a minute`
            : bound === 'rows'
              ? `${max} ${NOUNS[kind]} stored`
              : `${max} bytes of ${NOUNS[kind]} stored`;
      return {
        kind,
        scope,
        bound,
        limit: max,
        variable,
        description: `the app has reached its bound of ${what} (${variable}); refused, nothing stored`,
      };
    }
    u.windowRows += 1;
    u.windowChars += chars;
    u.rows += 1;
    u.chars += chars;
    return null;
  }

  /** Counts a refused write in `gateway_app_storage_refused_total`; returns the error that says so. */
  refused(refusal: StorageRefusal): StorageBoundError {
    this.metrics.appStorageRefused.inc({ app: this.label(refusal.scope), kind: refusal.kind, bound: refusal.bound });
    return new StorageBoundError(refusal);
  }

  /**
   * Gives back rows (and their characters) that were counted but not written, or that a purge removed. A row `take`
   * counted at `takenAt` and not written after all (a duplicate, a conflict, an insert that failed) is given back to
   * that minute's counts too, while that minute lasts: a refusal or a repeat uses up nothing.
   */
  release(kind: StorageKind, scope: string, rows: number, chars = 0, takenAt?: number): void {
    const u = this.usage[kind].get(scope);
    if (!u) return;
    u.rows = Math.max(0, u.rows - rows);
    u.chars = Math.max(0, u.chars - chars);
    // The minute it was counted in is still the current one: no later `take` has started a new one since.
    if (takenAt !== undefined && u.windowStart <= takenAt) {
      u.windowRows = Math.max(0, u.windowRows - rows);
      u.windowChars = Math.max(0, u.windowChars - chars);
    }
  }

  /** One row of `kind` on `scope`'s credentials, as an append charges it: taken, refunded if not written, refused. */
  charge(kind: StorageKind, scope: string): OwnerCharge {
    return new OwnerCharge(this, kind, scope);
  }

  /**
   * Sets each owner's totals from the database: one grouped count per kind, never per request (at start, and
   * periodically where replicas share the database). The per-minute windows are left as they are.
   */
  async resync(db: Kysely<Database>, sources: StorageSources, now = this.now()): Promise<void> {
    const chars = sql<number>`coalesce(sum(length(payload) + length(meta)), 0)`;
    const events = sources.webhookEventKinds.length
      ? await db
          .selectFrom('events')
          .select(['scope', (eb) => eb.fn.countAll<number>().as('n'), chars.as('chars')])
          .where('scope', 'is not', null)
          .where('kind', 'in', [...sources.webhookEventKinds])
          .groupBy('scope')
          .execute()
      : [];
    const pending = await db
      .selectFrom('mobile_id_pending')
      .select(['scope', (eb) => eb.fn.countAll<number>().as('n'), chars.as('chars')])
      .where('scope', 'is not', null)
      .groupBy('scope')
      .execute();
    const tokens = await db
      .selectFrom('notification_tokens')
      .select(['created_by as scope', (eb) => eb.fn.countAll<number>().as('n')])
      .where('expires_at', '>', now)
      .groupBy('created_by')
      .execute();
    const addresses = await db
      .selectFrom('identification_callbacks')
      .select(['created_by as scope', (eb) => eb.fn.countAll<number>().as('n')])
      .groupBy('created_by')
      .execute();
    this.replace('events', [...events, ...pending]);
    this.replace('notification-tokens', tokens);
    this.replace('callback-addresses', addresses);
  }

  private replace(
    kind: StorageKind,
    rows: readonly { scope: string | null; n: number | string | bigint; chars?: number | string | bigint }[],
  ): void {
    const totals = new Map<string, { rows: number; chars: number }>();
    for (const r of rows) {
      if (r.scope === null) continue;
      const t = totals.get(r.scope) ?? { rows: 0, chars: 0 };
      t.rows += Number(r.n);
      t.chars += Number(r.chars ?? 0);
      totals.set(r.scope, t);
    }
    for (const [scope, u] of this.usage[kind]) if (!totals.has(scope)) ((u.rows = 0), (u.chars = 0));
    for (const [scope, t] of totals) {
      const u = this.of(kind, scope);
      u.rows = t.rows;
      u.chars = t.chars;
    }
  }

  private of(kind: StorageKind, scope: string): Usage {
    let u = this.usage[kind].get(scope);
    if (!u) {
      u = { windowStart: 0, windowRows: 0, windowChars: 0, rows: 0, chars: 0 };
      this.usage[kind].set(scope, u);
    }
    return u;
  }

  /** The gauges' values, read when /metrics is scraped. */
  private snapshot(): { app: string; kind: StorageKind; rows: number; chars: number }[] {
    const out: { app: string; kind: StorageKind; rows: number; chars: number }[] = [];
    for (const kind of Object.keys(this.usage) as StorageKind[]) {
      for (const [scope, u] of this.usage[kind])
        if (u.rows > 0 || u.chars > 0) out.push({ app: this.label(scope), kind, rows: u.rows, chars: u.chars });
    }
    return out;
  }
}

/** `AppStorage.charge`: the time of its `take`, so that a refund gives back that minute's count too. */
class OwnerCharge {
  private takenAt = 0;

  constructor(
    private readonly storage: AppStorage,
    private readonly kind: StorageKind,
    private readonly scope: string,
  ) {}

  take(chars: number): StorageRefusal | null {
    this.takenAt = this.storage.now();
    return this.storage.take(this.kind, this.scope, chars, this.takenAt);
  }

  refund(chars: number): void {
    this.storage.release(this.kind, this.scope, 1, chars, this.takenAt);
  }

  refused(refusal: StorageRefusal): StorageBoundError {
    return this.storage.refused(refusal);
  }
}
