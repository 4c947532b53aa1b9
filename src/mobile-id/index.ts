import { sandboxedUpstreams, type Config } from '../config.js';
import type { Events } from '../events/index.js';
import type { Logger } from '../logger.js';
import type { Store } from '../store/index.js';
import { loadSecretBox } from './sealing.js';
import { MobileIdService, type SandboxNotifier } from './service.js';
import { configuredKeys } from './verify.js';

export { MobileIdService, MOBILE_ID_EVENT_KIND, type MobileIdAuthentication } from './service.js';

/**
 * The mobile-ID service from the config. In sandbox mode (no MOBILEID_NOTIFICATION_TOKENS, no JWKS) it
 * accepts the sandbox's token and verifies id_tokens against the sandbox's JWKS, exactly as it would a
 * real service's.
 */
export function createMobileIdService(options: {
  config: Config;
  store: Store;
  events: Events;
  logger: Logger;
  sandbox: SandboxNotifier | null;
  /** The gateway's own base URL (loopback), known once it listens. */
  selfUrl: () => string;
}): MobileIdService {
  const { config, sandbox } = options;
  const m = config.mobileId;
  const inSandbox = sandboxedUpstreams(config).mobileId && sandbox !== null;
  return new MobileIdService({
    db: options.store.db,
    events: options.events,
    box: loadSecretBox({ key: config.tokenEncryptionKey, dataDir: config.dataDir, shared: options.store.dialect === 'postgres', logger: options.logger }),
    verifier: inSandbox
      ? { keys: configuredKeys({ jwksUrl: sandbox.jwksUrl }), issuer: sandbox.issuer, clientId: sandbox.clientId, strict: m.strictIdToken }
      : { keys: configuredKeys(m), issuer: m.issuer, clientId: m.clientId, strict: m.strictIdToken },
    notificationTokens: inSandbox ? [...m.notificationTokens, sandbox.notificationToken] : m.notificationTokens,
    logger: options.logger.child({ component: 'mobile-id' }),
    sandbox: inSandbox ? sandbox : null,
    notificationUri: () => `${options.selfUrl()}/webhooks/mobile-id`,
    rejectionRetentionMs: config.eventRetentionMs,
  });
}
