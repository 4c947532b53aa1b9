import type { Config, ConfiguredNotificationToken } from '../config/index.js';
import type { Events } from '../events/index.js';
import type { Logger } from '../logger.js';
import type { Metrics } from '../metrics.js';
import type { SecretBox } from '../secret.js';
import type { AppStorage } from '../store/app-storage.js';
import type { Store } from '../store/index.js';
import type { SandboxNotifier } from './sandbox-trigger.js';
import { MobileIdService } from './service.js';
import { configuredKeys } from './verify.js';

export { MobileIdService } from './service.js';

/**
 * What the gateway trusts of the mobile identity service, which calls us (the composition root resolves
 * it): the accepted notification tokens and the keys id_tokens are verified with.
 */
export interface MobileIdEndpoint {
  readonly notificationTokens: readonly ConfiguredNotificationToken[];
  readonly jwks: { readonly jwksUrl?: string | undefined; readonly jwksFile?: string | undefined };
  readonly issuer: string | undefined;
  readonly clientId: string | undefined;
  /** A notifier that makes the service send a notification on demand (the simulator's); null for a real service. */
  readonly notifier: SandboxNotifier | null;
}

/** The mobile-ID service over its endpoint, the counterpart of the cloud and identity factories. */
export function createMobileIdService(
  endpoint: MobileIdEndpoint,
  deps: {
    config: Config;
    store: Store;
    events: Events;
    logger: Logger;
    /** The gateway's own base URL (loopback), known once it listens. */
    selfUrl: () => string;
    /** The gateway's secret (TOKEN_ENCRYPTION_KEY) that seals stored tokens. */
    box: SecretBox;
    /** Per-app storage bounds (src/store/app-storage.ts). */
    storage: AppStorage | null;
    metrics: Metrics;
    /** Tests only: the clock of pending notifications and of the JWKS retry schedule. */
    now?: (() => number) | undefined;
  },
): MobileIdService {
  const { config } = deps;
  const logger = deps.logger.child({ component: 'mobile-id' });
  const keys = configuredKeys(endpoint.jwks, {
    logger,
    onFetch: (outcome) => deps.metrics.mobileIdJwksFetches.inc({ outcome }),
  });
  return new MobileIdService({
    db: deps.store.db,
    events: deps.events,
    box: deps.box,
    verifier: {
      keys,
      issuer: endpoint.issuer,
      clientId: endpoint.clientId,
      strict: config.mobileId.strictIdToken,
      logger,
    },
    notificationTokens: endpoint.notificationTokens,
    logger,
    sandbox: endpoint.notifier,
    notificationUri: () => `${deps.selfUrl()}/webhooks/mobile-id`,
    rejectionRetentionMs: config.eventRetentionMs,
    pendingLimit: config.mobileId.pendingMaxPerApp,
    storage: deps.storage,
    metrics: deps.metrics,
    clearFromIntake: config.delivery.clearFromIntake,
    payloadFromIntake: config.delivery.payloadFromIntake,
    plainChecks: config.mobileId.plainChecks,
    now: deps.now,
  });
}
