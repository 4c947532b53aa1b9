// APP_LIVE_SUBSCRIPTIONS: how many subscriptions one app holds open at once on this replica, over every streaming
// transport together (graphql-ws, SSE, MCP's subscriptions/listen and waiting wait_for_events). A waiting subscription
// holds memory until it ends, so without a bound one app could open them until the gateway runs out. One counter per
// owner scope in memory: the subscribe path pays a Map lookup and an increment, and an event pays nothing.
import type { Caller } from '../auth/caller.js';
import { ErrorCode, GatewayError } from '../errors.js';
import type { Metrics } from '../metrics.js';

/** The variable that sets the bound, named to the app and in the docs. */
export const LIVE_SUBSCRIPTIONS_VARIABLE = 'APP_LIVE_SUBSCRIPTIONS';

/**
 * A subscription past the bound: RATE_LIMITED with `extensions.bound` (`subscriptions:live`), `limit` and `variable`,
 * as the storage bounds say theirs (src/store/app-storage.ts). No `retryAfter`: room comes back when one of the app's
 * own subscriptions ends, not after a time.
 */
export class LiveSubscriptionsError extends GatewayError {
  constructor(readonly limit: number) {
    super(
      ErrorCode.RATE_LIMITED,
      `this app already has ${limit} live subscriptions on this replica (${LIVE_SUBSCRIPTIONS_VARIABLE}); end one before opening another; nothing was run`,
      { bound: 'subscriptions:live', limit, variable: LIVE_SUBSCRIPTIONS_VARIABLE },
    );
  }
}

/**
 * The live subscriptions of each owner scope (an app; every caller of an open gateway shares `open`). `take` counts one
 * or refuses it; the `release` it returns gives it back, once, however often it is called, so that a transport's
 * several ends of one subscription (its source's end, `return`, a socket's close) count it back once.
 */
export class LiveSubscriptions {
  private readonly live = new Map<string, number>();

  constructor(
    /** 0: no limit (still counted, for the gauge). */
    private readonly limit: number,
    private readonly metrics: Metrics,
    /** The app label of an owner scope in metrics (its name, never a key digest of the scope). */
    private readonly label: (scope: string) => string,
  ) {
    metrics.countLiveSubscriptions(() => this.snapshot());
  }

  /** One more live subscription of `caller`'s app, and how it is given back; or the refusal, nothing counted. */
  take(caller: Caller): (() => void) | LiveSubscriptionsError {
    const scope = caller.scope;
    const held = this.live.get(scope) ?? 0;
    if (this.limit > 0 && held >= this.limit) {
      this.metrics.liveSubscriptionsRefused.inc({ app: this.label(scope) });
      return new LiveSubscriptionsError(this.limit);
    }
    this.live.set(scope, held + 1);
    let counted = true;
    return () => {
      if (!counted) return;
      counted = false;
      const left = (this.live.get(scope) ?? 1) - 1;
      if (left > 0) this.live.set(scope, left);
      else this.live.delete(scope);
    };
  }

  /** The live subscriptions of one owner scope (0 when none). */
  of(scope: string): number {
    return this.live.get(scope) ?? 0;
  }

  /** Every app with a live subscription, by its label, and how many (read when /metrics is scraped). */
  private snapshot(): { app: string; live: number }[] {
    return [...this.live].map(([scope, live]) => ({ app: this.label(scope), live }));
  }
}
