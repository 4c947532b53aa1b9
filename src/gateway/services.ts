// The services the resolvers call, built over the store: budgets and storage bounds, the ledger, idempotency, the
// event log and its bus, the three upstreams' domains, provisioning and its plans, and agents' plans.
import { AgentPlans } from '../agents/plans.js';
import { cloudLedgerRecord, ownerOfRecord } from '../auth/tenancy.js';
import type { Config } from '../config/index.js';
import { CursorCodec, EventLog, Events, EventStreams, InProcessBus, type EventBus } from '../events/index.js';
import { PostgresBus } from '../events/postgres-bus.js';
import { IDENTIFICATION_EVENT_KIND } from '../identity/completions.js';
import { VERIFICATION_EVENT_KIND } from '../identity/service.js';
import type { Logger } from '../logger.js';
import type { Metrics } from '../metrics.js';
import { MOBILE_ID_EVENT_KIND } from '../mobile-id/stored.js';
import type { PauseAt } from '../phases.js';
import { ProvisioningPlanner } from '../provisioning/plan.js';
import { ProvisioningService } from '../provisioning/service.js';
import { RateLimits } from '../ratelimit/buckets.js';
import { LiveSubscriptions } from '../ratelimit/live-subscriptions.js';
import type { SecretBox } from '../secret.js';
import type { ConfiguredApp, Services } from '../services.js';
import { AgentPlanRows } from '../store/agent-plans.js';
import { AppActivity } from '../store/app-activity.js';
import { AppStorage } from '../store/app-storage.js';
import { IdempotencyRecords } from '../store/idempotency.js';
import type { Store } from '../store/index.js';
import { Ledger, type LedgerRecord } from '../store/ledger.js';
import type { Tracing } from '../telemetry/tracing.js';
import { Idempotency } from '../upstream/idempotency.js';
import type { GatewayTesting } from './options.js';
import { startUpstreams, type Upstreams } from './upstreams.js';

/** The event kinds webhooks store on an app's credentials: their rows count in the app's storage (decision 051). */
export const WEBHOOK_EVENT_KINDS = [MOBILE_ID_EVENT_KIND, VERIFICATION_EVENT_KIND, IDENTIFICATION_EVENT_KIND];

export interface BuiltServices {
  readonly services: Services;
  readonly upstreams: Upstreams;
  readonly idempotencyRecords: IdempotencyRecords;
  /** The PostgreSQL bus, whose readiness /readyz reports; null on SQLite. */
  readonly replicated: PostgresBus | null;
  /** A cloud resource of the ledger by id, read through the owner rule of every cloud read (src/auth/tenancy.ts). */
  readonly cloudLookup: (id: string) => Promise<LedgerRecord | null>;
}

export async function buildServices(
  config: Config,
  parts: {
    logger: Logger;
    metrics: Metrics;
    store: Store;
    box: SecretBox;
    tracing: Tracing;
    testing: GatewayTesting;
    now: () => number;
    pause: PauseAt | undefined;
    /** The address the gateway listens on, known once it listens (callbacks are built from it). */
    listenedUrl: () => string;
    /** The apps of the running configuration (a reload changes them). */
    configured: () => readonly ConfiguredApp[];
    onClose: (close: () => Promise<void>) => void;
  },
): Promise<BuiltServices> {
  const { logger, metrics, store, box, tracing, testing, pause } = parts;
  const rateLimits = await RateLimits.create({ limits: config.rateLimits, store, metrics, logger });

  // What each app's credentials can make the gateway store, bounded per app (docs/decisions/051): counted from the
  // database once here, then by this process, and counted again every few minutes where replicas share it.
  const storageLabel = (scope: string) =>
    scope.startsWith('app:') ? scope.slice(4) : `scope-${box.digest(`app storage label\u0000${scope}`).slice(0, 12)}`;
  const storage = new AppStorage(config.storageLimits, metrics, storageLabel, parts.now);
  await storage.resync(store.db, { webhookEventKinds: WEBHOOK_EVENT_KINDS });

  // Only the shared cloud ledger is kept: a record one app owns is read from the store every time, so that how fast
  // an id answers tells no other app whether it exists (docs/decisions/043).
  const ledger = new Ledger({
    store,
    cache: { size: config.ledgerCacheRecords, keeps: (record) => ownerOfRecord(record) === null },
    replayFromLedger: config.idempotencyReplayFromLedger,
  });
  const idempotencyRecords = new IdempotencyRecords({ store, claimWithoutSync: config.sqliteClaimWithoutSync });
  const idempotency = new Idempotency({
    pauseAt: pause,
    records: idempotencyRecords,
    metrics,
    retentionMs: config.idempotencyRetentionMs,
    waitMs: config.idempotencyWaitMs,
    leaseMs: config.idempotencyTakeoverMs,
    logger,
    digest: (text) => box.digest(text),
    ...(testing.clock ? { now: testing.clock } : {}),
  });

  const eventLog = new EventLog(store.db, config.eventRetentionMs, store.dialect, store.execute);
  // Cursors are sealed under the gateway secret: opaque, and the same on every replica (docs/decisions/067).
  const cursors = new CursorCodec(box.derive('gateway cursor mac v1'), box.derive('gateway cursor encryption v1'));
  // With PostgreSQL, events cross replicas through LISTEN/NOTIFY; with SQLite there is one process.
  const replicated =
    store.dialect === 'postgres' && config.databaseUrl
      ? await PostgresBus.start({
          databaseUrl: config.databaseUrl,
          db: store.db,
          log: eventLog,
          logger,
          cursors,
          groupNotices: config.eventNotifyGrouped,
          groupProbes: config.eventOrderProbeGrouped,
        })
      : null;
  // Cursors start after what the log holds: events already stored are not published again. Numbers the retention purge
  // deleted count as delivered too: the log may hold none of them (emptied by the purge before this start), and a
  // cursor whose floor lay below the purge's watermark would be refused `expired` (src/events/replay.ts).
  const bus: EventBus =
    replicated ?? new InProcessBus(Math.max(await eventLog.lastSeq(), await eventLog.purgedThrough()), cursors);
  parts.onClose(() => bus.close());
  const events = new Events(
    eventLog,
    bus,
    new EventStreams(eventLog, bus, cursors, tracing, parts.now),
    metrics,
    tracing,
    parts.now,
  );

  const upstreams = await startUpstreams(config, {
    logger,
    metrics,
    store,
    ledger,
    idempotency,
    events,
    tracing,
    publicUrl: () => config.publicUrl ?? parts.listenedUrl(),
    selfUrl: parts.listenedUrl,
    onClose: parts.onClose,
    box,
    storage,
    ...(pause ? { pauseAt: pause } : {}),
    clock: testing.clock,
  });
  const { cloud } = upstreams;
  // Provisioning and plans read the ledger through the owner rule of every cloud read (src/auth/tenancy.ts).
  const cloudLookup = async (id: string) => cloudLedgerRecord(await ledger.get(id));
  const provisioning = new ProvisioningService({
    db: store.db,
    cloud,
    lookup: cloudLookup,
    events,
    staleMs: config.idempotencyTakeoverMs,
    bounds: config.provisioningBounds,
    charge: (caller, points) => rateLimits.charge(caller, 'creations', points),
    digest: (text) => box.digest(text),
    keys: idempotency,
    now: parts.now,
  });
  // Shutdown lets running provisionings finish their current step before the store closes, and start no other.
  parts.onClose(() => provisioning.stop());
  const activity = new AppActivity(store.db);
  const services: Services = {
    config,
    store,
    metrics,
    ledger,
    idempotency,
    cloud,
    provisioning,
    // A plan is charged read points by its size, at most PROVISIONING_MAX_CONCURRENT_PLANS of an app run at once, and
    // every plan in flight takes turns on the event loop (docs/decisions/053).
    plans: new ProvisioningPlanner(provisioning, cloud, cloudLookup, {
      charge: (caller, points) => rateLimits.take(caller, 'reads', points),
      maxConcurrentPerApp: config.maxConcurrentPlans,
      ...(testing.planTurns ? { turns: testing.planTurns } : {}),
      observe: {
        refused: (app) => metrics.plansRefused.inc({ app }),
        inFlight: (plans) => metrics.plansInFlight.set(plans),
      },
    }),
    events,
    identity: upstreams.identity,
    mobileId: upstreams.mobileId,
    rateLimits,
    storage,
    // Each app's live subscriptions on this replica, over every streaming transport (APP_LIVE_SUBSCRIPTIONS).
    liveSubscriptions: new LiveSubscriptions(config.liveSubscriptions, metrics, storageLabel),
    // The configured apps of the running configuration (a reload of GATEWAY_APPS_FILE changes them).
    apps: {
      get configured() {
        return parts.configured();
      },
      activity,
    },
    agentPlans: new AgentPlans(new AgentPlanRows(store.db), {
      seal: (plain, context) => box.seal(plain, context),
      open: (sealed, context) => box.open(sealed, context),
      approvalTtlMs: config.mcp.approvalTtlMs,
      approverOnly: config.mcp.approval === 'approver',
      // An execution shows it is alive as an idempotent call renews its lease: a plan left executing by a process that
      // stopped is run again after the same time (docs/decisions/012).
      takeoverMs: config.idempotencyTakeoverMs,
      // A plan run again after an unknown outcome replays what its earlier run completed from the idempotency records:
      // it lives no longer than they are kept.
      idempotencyRetentionMs: config.idempotencyRetentionMs,
      logger,
      ...(testing.clock ? { now: testing.clock } : {}),
    }),
  };
  return { services, upstreams, idempotencyRecords, replicated, cloudLookup };
}
