import { collectDefaultMetrics, Counter, Gauge, Registry, type Metric } from 'prom-client';

/** One label set of a labelled metric: its labels object, as prom-client's registry reads it. */
interface Labelled {
  readonly labels: Record<string, string>;
}

/** One label set of a LabelledHistogram: its observations per bucket (the last: above every bound), sum and count. */
interface Series extends Labelled {
  readonly counts: Float64Array;
  sum: number;
  count: number;
}

/** One label set of a LabelledCounter. */
interface Count extends Labelled {
  value: number;
}

/** Label values in the order of the label names. */
type ValuesOf<Names extends readonly string[]> = { readonly [I in keyof Names]: string };

/**
 * What the gateway's own metrics share: the series of each label set, found by walking one map per label (nothing
 * allocated once the set has been seen), kept in the order they were first seen as prom-client keeps them, and
 * registered with a prom-client Registry, which writes `/metrics` from what the metric gives it.
 */
abstract class LabelledMetric<const Names extends readonly [string, ...string[]], S extends Labelled> {
  private bySeries = new Map<string, unknown>();
  protected series: S[] = [];

  constructor(
    readonly name: string,
    readonly help: string,
    private readonly labelNames: Names,
    registry: Registry,
  ) {
    registry.registerMetric(this as unknown as Metric);
  }

  /** The series of the label values given, made on first use. */
  protected seriesOf(values: ValuesOf<Names>): S {
    let level = this.bySeries;
    const last = values.length - 1;
    for (let i = 0; i < last; i++) {
      let next = level.get(values[i]!) as Map<string, unknown> | undefined;
      if (next === undefined) level.set(values[i]!, (next = new Map()));
      level = next;
    }
    let series = level.get(values[last]!) as S | undefined;
    if (series === undefined) {
      const labels: Record<string, string> = {};
      this.labelNames.forEach((name, i) => (labels[name] = values[i]!));
      level.set(values[last]!, (series = this.create(labels)));
      this.series.push(series);
    }
    return series;
  }

  protected abstract create(labels: Record<string, string>): S;

  /**
   * Forgets every series, as the registry's `resetMetrics` asks.
   *
   * @public
   */
  reset(): void {
    this.bySeries = new Map();
    this.series = [];
  }
}

/**
 * A Prometheus histogram with labels, for the observations every request and every upstream attempt make: it walks
 * one map per label and the bounds, and allocates nothing itself once its label set has been seen (the caller's tuple
 * of values aside). prom-client's Histogram makes a closure, a labels object and a string key for each one, and counts
 * in objects keyed by each bound turned into a string (~440 ns an observation in a loop, against ~35 here;
 * docs/decisions/134). What `/metrics` writes of it is what prom-client's registry writes of prom-client's Histogram
 * given the same observations (the same values from `getForPromString` and `get`): test/metrics.test.ts holds the
 * two texts equal.
 */
export class LabelledHistogram<const Names extends readonly [string, ...string[]]> extends LabelledMetric<
  Names,
  Series
> {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  private readonly bounds: readonly number[];

  constructor(name: string, help: string, labelNames: Names, buckets: readonly number[], registry: Registry) {
    if (buckets.some((b, i) => i > 0 && !(b > buckets[i - 1]!)))
      throw new Error(`${name}: buckets must be in increasing order`);
    super(name, help, labelNames, registry);
    this.bounds = [...buckets];
  }

  /** Counts `value` under the label values given in the order of the label names. */
  observe(values: ValuesOf<Names>, value: number): void {
    if (!Number.isFinite(value)) throw new TypeError(`Value is not a valid number: ${value}`);
    const series = this.seriesOf(values);
    const bounds = this.bounds;
    let i = 0;
    while (i < bounds.length && value > bounds[i]!) i++;
    series.counts[i]! += 1;
    series.sum += value;
    series.count += 1;
  }

  protected create(labels: Record<string, string>): Series {
    return { labels, counts: new Float64Array(this.bounds.length + 1), sum: 0, count: 0 };
  }

  /** The values as prom-client's Histogram gives them to the registry: each series' buckets, then its sum and count. */
  getForPromString() {
    const values: Array<{
      labels: Record<string, string | number>;
      sharedLabels: Record<string, string>;
      value: number;
      metricName: string;
      exemplar: null | undefined;
    }> = [];
    const bucket = `${this.name}_bucket`;
    for (const s of this.series) {
      let below = 0;
      this.bounds.forEach((le, i) => {
        below += s.counts[i]!;
        values.push({ labels: { le }, sharedLabels: s.labels, value: below, metricName: bucket, exemplar: null });
      });
      values.push(
        { labels: { le: '+Inf' }, sharedLabels: s.labels, value: s.count, metricName: bucket, exemplar: null },
        { labels: {}, sharedLabels: s.labels, value: s.sum, metricName: `${this.name}_sum`, exemplar: undefined },
        { labels: {}, sharedLabels: s.labels, value: s.count, metricName: `${this.name}_count`, exemplar: undefined },
      );
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }

  /**
   * The same with each value's labels and its series' labels in one object: what the registry's `getMetricsAsJSON`
   * reads (the gateway's `/metrics` reads `getForPromString`).
   *
   * @public
   */
  get() {
    const data = this.getForPromString();
    return {
      ...data,
      values: data.values.map(({ labels, sharedLabels, ...rest }) => ({
        ...rest,
        labels: { ...labels, ...sharedLabels },
      })),
    };
  }
}

/**
 * A Prometheus counter with labels, for the counts every webhook delivery and every published event make: as
 * LabelledHistogram, no closure, labels object or string key per count (prom-client's Counter makes a key of the labels
 * and validates them on each `inc`). What the registry writes of it is what it writes of prom-client's Counter given
 * the same counts: test/metrics.test.ts holds the texts and the JSON equal.
 */
export class LabelledCounter<const Names extends readonly [string, ...string[]]> extends LabelledMetric<Names, Count> {
  readonly type = 'counter';
  readonly aggregator = 'sum';

  /** Adds `by` (1 unless given) under the label values given in the order of the label names. */
  inc(values: ValuesOf<Names>, by = 1): void {
    if (!Number.isFinite(by)) throw new TypeError(`Value is not a valid number: ${by}`);
    if (by < 0) throw new Error('It is not possible to decrease a counter');
    this.seriesOf(values).value += by;
  }

  protected create(labels: Record<string, string>): Count {
    return { value: 0, labels };
  }

  /**
   * The values as prom-client's Counter gives them to the registry, for its text and its JSON.
   *
   * @public
   */
  get() {
    return {
      help: this.help,
      name: this.name,
      type: this.type,
      values: this.series.map(({ value, labels }) => ({ value, labels })),
      aggregator: this.aggregator,
    };
  }
}

/** The gateway's Prometheus metrics, one registry per gateway instance (tests run several at once). */
export class Metrics {
  readonly registry = new Registry();

  readonly upstreamDuration = new LabelledHistogram(
    'gateway_upstream_request_duration_seconds',
    'Duration of one upstream HTTP attempt, by upstream, route and status (or error code).',
    ['upstream', 'route', 'status'],
    [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    this.registry,
  );

  readonly upstreamRetries = new Counter({
    name: 'gateway_upstream_retries_total',
    help: 'Upstream attempts that failed transiently and were retried, by upstream, route and reason.',
    labelNames: ['upstream', 'route', 'reason'] as const,
    registers: [this.registry],
  });

  readonly upstreamCircuitState = new Gauge({
    name: 'gateway_upstream_circuit_state',
    help: "State of each upstream's circuit breaker: 0 closed, 1 open (calls refused at once), 2 half-open (trial calls let through).",
    labelNames: ['upstream'] as const,
    registers: [this.registry],
  });

  readonly upstreamCircuitTransitions = new Counter({
    name: 'gateway_upstream_circuit_transitions_total',
    help: "Changes of state of each upstream's circuit breaker, from and to closed, open or half-open.",
    labelNames: ['upstream', 'from', 'to'] as const,
    registers: [this.registry],
  });

  readonly upstreamCircuitShortCircuits = new Counter({
    name: 'gateway_upstream_circuit_short_circuits_total',
    help: 'Upstream attempts an open (or full half-open) circuit refused at once, without sending anything.',
    labelNames: ['upstream'] as const,
    registers: [this.registry],
  });

  readonly upstreamOutcomeUnknown = new Counter({
    name: 'gateway_upstream_outcome_unknown_total',
    help: 'Requests whose outcome was unknown and that were not repeated (UPSTREAM_OUTCOME_UNKNOWN): to an upstream not known to honour Idempotency-Key, or a creation answered with a redirect (3xx).',
    labelNames: ['upstream', 'route'] as const,
    registers: [this.registry],
  });

  readonly upstreamAnswersIncomplete = new Counter({
    name: 'gateway_upstream_answers_incomplete_total',
    help: 'Upstream 2xx answers kept because the gateway could not read the created id (UPSTREAM_ANSWER_INCOMPLETE), by operation; one whose id a path variable can name is completed by setting it (docs/decisions/042).',
    labelNames: ['operation'] as const,
    registers: [this.registry],
  });
  readonly idempotentRetriesOfUnknown = new Counter({
    name: 'gateway_idempotent_retries_of_unknown_total',
    help: 'Calls that sent a request again after its earlier outcome was unknown (the app retried with the same key), by operation.',
    labelNames: ['operation'] as const,
    registers: [this.registry],
  });

  readonly idempotentReplays = new Counter({
    name: 'gateway_idempotent_replays_total',
    help: 'Mutations answered from a stored idempotency record without an upstream call, by operation.',
    labelNames: ['operation'] as const,
    registers: [this.registry],
  });

  /** Every request observes it, the mobile-ID webhook's too (docs/decisions/156). */
  readonly httpRequests = new LabelledHistogram(
    'gateway_http_request_duration_seconds',
    'Duration of HTTP requests served by the gateway, by route and status.',
    ['route', 'status'],
    [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    this.registry,
  );

  readonly jwtChecks = new Counter({
    name: 'gateway_jwt_checks_total',
    help: 'JWTs apps presented, by check: verified (signature, iss, aud, exp and nbf checked) or cached (a token verified before, answered from AUTH_JWT_CACHE_SIZE until its exp or the next JWKS fetch).',
    labelNames: ['check'] as const,
    registers: [this.registry],
  });

  readonly configReloads = new Counter({
    name: 'gateway_config_reloads_total',
    help: 'Reloads of the configuration files (GATEWAY_APPS_FILE, AUTH_ISSUERS, AUTH_JWKS_FILE, MOBILEID_JWKS_FILE, the trusted-documents manifest) on SIGHUP or POST /admin/reload, by result: ok (every file read and swapped in at once) or failed (a bad file: the running configuration is kept).',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });

  readonly jwtRefusals = new Counter({
    name: 'gateway_jwt_refusals_total',
    help: 'JWTs whose signature and claims verified but that name no app the gateway accepts, by reason: no_app_claim, app_name (not 1 to 64 ASCII letters, digits, _ . -), not_accepted (not in AUTH_APPS, or `*` naming an app an entry gives to another claim value), configured_name (an app configured with keys, now or before, which AUTH_APPS does not make one with it; or, under `*`, a name an entry of AUTH_APPS or AUTH_ISSUERS listed before and none lists now) or other_issuer (with AUTH_ISSUERS, `*` naming an app another provider lists).',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });

  readonly webhooks = new LabelledCounter(
    'gateway_webhooks_total',
    'Webhook deliveries by endpoint and outcome (accepted, duplicate, rejected).',
    ['endpoint', 'outcome'],
    this.registry,
  );

  readonly mobileIdRejections = new Counter({
    name: 'gateway_mobile_id_rejections_total',
    help: 'Mobile-ID notifications refused (and kept in the quarantine, see mobileIdRejections), by reason.',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });

  readonly mobileIdPending = new Gauge({
    name: 'gateway_mobile_id_pending_verifications',
    help: 'Mobile-ID notifications acknowledged whose id_token is not verified yet (JWKS unreachable): not delivered until it is.',
    registers: [this.registry],
  });

  readonly mobileIdVerifiedLate = new Counter({
    name: 'gateway_mobile_id_verified_late_total',
    help: 'Pending mobile-ID notifications verified later and delivered.',
    registers: [this.registry],
  });

  readonly mobileIdPendingRefused = new Counter({
    name: 'gateway_mobile_id_pending_refused_total',
    help: 'Pending mobile-ID notifications finally refused (a check failed, or still unverifiable at EVENT_RETENTION) and quarantined, by reason.',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });

  readonly mobileIdJwksFetches = new Counter({
    name: 'gateway_mobile_id_jwks_fetches_total',
    help: 'Fetches of MOBILEID_JWKS_URL, by outcome (ok, failed): while it is down, one schedule with backoff (5 s doubling to 60 s), not one per notification.',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });

  readonly eventsPublished = new LabelledCounter(
    'gateway_events_published_total',
    'Events published to subscribers, by kind.',
    ['kind'],
    this.registry,
  );

  /** `app` is the app's name (GATEWAY_API_KEYS `name:key`), or for a bare key a keyed digest of it (src/auth/caller.ts). */
  readonly rateLimitDecisions = new Counter({
    name: 'gateway_rate_limit_points_total',
    help: 'Rate-limit points asked for, by app (its name, or a keyed digest of a bare key), bucket (creations, reads) and outcome (allowed, refused, refunded: given back when what they paid for was refused after all).',
    labelNames: ['app', 'bucket', 'outcome'] as const,
    registers: [this.registry],
  });

  readonly rateLimitRemaining = new Gauge({
    name: 'gateway_rate_limit_remaining_points',
    help: 'Points left in the current window after the last decision, by app (its name, or a keyed digest of a bare key) and bucket.',
    labelNames: ['app', 'bucket'] as const,
    registers: [this.registry],
  });

  readonly plansInFlight = new Gauge({
    name: 'gateway_plans_in_flight',
    help: 'planKafkaCluster and planVirtualMachine being worked out, every app together (they take turns on the event loop).',
    registers: [this.registry],
  });

  readonly agentPlans = new Gauge({
    name: 'gateway_agent_plans',
    help: "Agents' plans stored (MCP_MUTATIONS=approve), by state: pending, approved, executing, succeeded, failed, unknown (one left executing by a process that stopped included), declined, expired. Updated by the job that purges them, every minute.",
    labelNames: ['state'] as const,
    registers: [this.registry],
  });

  readonly plansRefused = new Counter({
    name: 'gateway_plans_refused_total',
    help: 'Plans refused because their app already had PROVISIONING_MAX_CONCURRENT_PLANS being worked out, by app (its name, or a keyed digest of a bare key).',
    labelNames: ['app'] as const,
    registers: [this.registry],
  });

  /** `app`: the app's name, or for another owner scope a keyed digest of it (never a key). */
  readonly appStorageRefused = new Counter({
    name: 'gateway_app_storage_refused_total',
    help: 'Writes refused because an app reached a storage bound (docs/decisions/051), by app, kind (events, notification-tokens, callback-addresses) and bound (rows-per-minute, bytes-per-minute, rows, bytes).',
    labelNames: ['app', 'kind', 'bound'] as const,
    registers: [this.registry],
  });

  /** Read when /metrics is scraped (src/store/app-storage.ts). */
  private appStorage: () => { app: string; kind: string; rows: number; chars: number }[] = () => [];

  readonly appStorageRows: Gauge = new Gauge({
    name: 'gateway_app_storage_rows',
    help: "Rows an app's credentials have made the gateway store, as this replica counts them, by app and kind (events, notification-tokens, callback-addresses).",
    labelNames: ['app', 'kind'] as const,
    registers: [this.registry],
    collect: (): void => {
      this.appStorageRows.reset();
      for (const u of this.appStorage()) this.appStorageRows.set({ app: u.app, kind: u.kind }, u.rows);
    },
  });

  readonly appStorageBytes: Gauge = new Gauge({
    name: 'gateway_app_storage_bytes',
    help: "Bytes of webhook events an app's credentials have made the gateway store, as this replica counts them, by app.",
    labelNames: ['app'] as const,
    registers: [this.registry],
    collect: (): void => {
      this.appStorageBytes.reset();
      for (const u of this.appStorage()) if (u.kind === 'events') this.appStorageBytes.set({ app: u.app }, u.chars);
    },
  });

  /** Where the storage gauges come from (src/store/app-storage.ts). */
  countAppStorage(usage: () => { app: string; kind: string; rows: number; chars: number }[]): void {
    this.appStorage = usage;
  }

  /** Read when /metrics is scraped (src/ratelimit/live-subscriptions.ts). */
  private liveSubscriptions: () => { app: string; live: number }[] = () => [];

  readonly liveSubscriptionsGauge: Gauge = new Gauge({
    name: 'gateway_live_subscriptions',
    help: "Subscriptions open on this replica, by app: graphql-ws, SSE, MCP's subscriptions/listen and waiting wait_for_events together (APP_LIVE_SUBSCRIPTIONS bounds each app's).",
    labelNames: ['app'] as const,
    registers: [this.registry],
    collect: (): void => {
      this.liveSubscriptionsGauge.reset();
      for (const u of this.liveSubscriptions()) this.liveSubscriptionsGauge.set({ app: u.app }, u.live);
    },
  });

  readonly liveSubscriptionsRefused = new Counter({
    name: 'gateway_live_subscriptions_refused_total',
    help: 'Subscriptions refused because their app already had APP_LIVE_SUBSCRIPTIONS open on this replica, by app.',
    labelNames: ['app'] as const,
    registers: [this.registry],
  });

  /** Where gateway_live_subscriptions comes from (src/ratelimit/live-subscriptions.ts). */
  countLiveSubscriptions(live: () => { app: string; live: number }[]): void {
    this.liveSubscriptions = live;
  }

  readonly webhookFieldsDropped = new Counter({
    name: 'gateway_webhook_fields_dropped_total',
    help: 'Unknown mobile-ID notification fields, and callback bodies, not kept whole because they were over the size kept (4 KiB of unknown fields, CALLBACK_BODY_KEPT_BYTES of callback body), by endpoint.',
    labelNames: ['endpoint'] as const,
    registers: [this.registry],
  });

  /** Read when /metrics is scraped: counting per delivery in prom-client would cost the fan-out it measures. */
  private subscriptionCounts: () => { executions: number; shared: number; compiled: number } = () => ({
    executions: 0,
    shared: 0,
    compiled: 0,
  });

  readonly subscriptionExecutions: Counter = new Counter({
    name: 'gateway_subscription_executions_total',
    help: "Executions of a subscription's selection for an event: one per event for each group of identical subscriptions (same document, variables and API key).",
    registers: [this.registry],
    collect: (): void => this.setCount(this.subscriptionExecutions, this.subscriptionCounts().executions),
  });

  readonly subscriptionResultsShared: Counter = new Counter({
    name: 'gateway_subscription_results_shared_total',
    help: 'Subscription events delivered with the result of an identical subscription, without executing again.',
    registers: [this.registry],
    collect: (): void => this.setCount(this.subscriptionResultsShared, this.subscriptionCounts().shared),
  });

  readonly subscriptionsClosed = new Counter({
    name: 'gateway_subscriptions_closed_total',
    help: 'Subscriber connections the gateway closed itself, by reason (slow_consumer: more than SUBSCRIBER_BUFFER_BYTES unread; closed with the last cursor, never skipped).',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });

  /** Read when /metrics is scraped (never per delivery): the WebSocket connections' unsent bytes. */
  private subscriberLag: () => number = () => 0;

  readonly subscriberLagBytes: Gauge = new Gauge({
    name: 'gateway_subscriber_lag',
    help: 'Bytes written to the slowest WebSocket subscriber and not yet sent, read at the scrape; at SUBSCRIBER_BUFFER_BYTES it is closed as a slow consumer.',
    registers: [this.registry],
    collect: (): void => this.subscriberLagBytes.set(this.subscriberLag()),
  });

  /** Where gateway_subscriber_lag comes from (the graphql-ws server). */
  measureSubscriberLag(lag: () => number): void {
    this.subscriberLag = lag;
  }

  readonly subscriptionExecutionsCompiled: Counter = new Counter({
    name: 'gateway_subscription_executions_compiled_total',
    help: "Executions of a subscription's selection answered by its compiled form (SUBSCRIPTION_COMPILED_SELECTION); the others ran graphql-js.",
    registers: [this.registry],
    collect: (): void => this.setCount(this.subscriptionExecutionsCompiled, this.subscriptionCounts().compiled),
  });

  /** Where the subscription counters come from (the streaming transports' shared execution). */
  countSubscriptions(counts: () => { executions: number; shared: number; compiled: number }): void {
    this.subscriptionCounts = counts;
  }

  private setCount(counter: Counter, value: number): void {
    counter.reset();
    counter.inc(value);
  }

  constructor(options: { defaultMetrics?: boolean } = {}) {
    // getMetricsAsArray gives the metrics themselves; prom-client's typings name them by the shape they write.
    if (options.defaultMetrics ?? true)
      for (const metric of processMetrics().getMetricsAsArray())
        this.registry.registerMetric(metric as unknown as Metric);
  }
}

let processRegistry: Registry | undefined;

/**
 * Node's process metrics (prom-client's defaults), made once per process and shown by every gateway's registry: they
 * describe the process, not a gateway. prom-client never stops what they start (a GC observer and an event-loop delay
 * timer, held by the runtime): made per gateway, they kept every gateway a process ever started alive, with its
 * registry and all it points to, each with a timer firing every 10 ms.
 */
function processMetrics(): Registry {
  if (processRegistry) return processRegistry;
  processRegistry = new Registry();
  collectDefaultMetrics({ register: processRegistry, prefix: 'gateway_' });
  return processRegistry;
}
