import type { AgentPlans } from './agents/plans.js';
import type { AppSource, Scope } from './auth/caller.js';
import type { CloudService } from './cloud/service.js';
import type { Config } from './config/index.js';
import type { Events } from './events/index.js';
import type { IdentityService } from './identity/service.js';
import type { Metrics } from './metrics.js';
import type { MobileIdService } from './mobile-id/service.js';
import type { ProvisioningPlanner } from './provisioning/plan.js';
import type { ProvisioningService } from './provisioning/service.js';
import type { RateLimits } from './ratelimit/buckets.js';
import type { LiveSubscriptions } from './ratelimit/live-subscriptions.js';
import type { AppActivity } from './store/app-activity.js';
import type { AppStorage } from './store/app-storage.js';
import type { Store } from './store/index.js';
import type { Ledger } from './store/ledger.js';
import type { Idempotency } from './upstream/idempotency.js';

/** Everything the resolvers and transports use, built once by the composition root (app.ts). */
export interface Services {
  readonly config: Config;
  readonly store: Store;
  readonly metrics: Metrics;
  readonly ledger: Ledger;
  readonly idempotency: Idempotency;
  readonly cloud: CloudService;
  /** Composite provisioning (provisionKafkaCluster, provisionVirtualMachine) and its progress. */
  readonly provisioning: ProvisioningService;
  /** planKafkaCluster and planVirtualMachine: the provisioning's requests, built and shown, never sent. */
  readonly plans: ProvisioningPlanner;
  /** The event log, bus and subscription streams of webhook events. */
  readonly events: Events;
  /** Identification links, verifications and their results, the rfm check, verification callbacks. */
  readonly identity: IdentityService;
  /** Mobile-ID completion notifications: the webhook, their results, notification tokens, the sandbox trigger. */
  readonly mobileId: MobileIdService;
  /** Per-API-key budgets of creations and reads (RATE_LIMIT_CREATIONS, RATE_LIMIT_READS). */
  readonly rateLimits: RateLimits;
  /** What each app's credentials have made the gateway store, and its bounds (docs/decisions/051). */
  readonly storage: AppStorage;
  /** Each app's live subscriptions on this replica, over every streaming transport, and their bound (APP_LIVE_SUBSCRIPTIONS). */
  readonly liveSubscriptions: LiveSubscriptions;
  /** The operator's list of apps: those configured, and when each app was last seen (docs/decisions/046). */
  readonly apps: { readonly configured: readonly ConfiguredApp[]; readonly activity: AppActivity };
  /** Plans agents made over MCP, their approvals and the audit trail (docs/decisions/060). */
  readonly agentPlans: AgentPlans;
}

/** A configured app as the operator's list shows it (never a key). */
export interface ConfiguredApp {
  readonly name: string;
  readonly source: AppSource;
  readonly scopes: readonly Scope[];
  readonly keys: number;
}
