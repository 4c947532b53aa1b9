import type { CloudResponseShape } from './cloud-shapes.js';
import { SANDBOX_SERVICE_ACCOUNT_TOKEN, startCloudSandbox, type CloudSandbox } from './cloud.js';
import {
  SANDBOX_IDENTIFICATION_TOKEN,
  startIdentificationSandbox,
  type IdentificationSandbox,
} from './identification.js';
import { startMobileIdSandbox, type MobileIdSandbox } from './mobile-id.js';
import { SANDBOX_VERIFICATION_TOKEN, startVerificationSandbox, type VerificationSandbox } from './verification.js';

export { SANDBOX_SERVICE_ACCOUNT_TOKEN, SANDBOX_IDENTIFICATION_TOKEN, SANDBOX_VERIFICATION_TOKEN };

export interface SandboxOptions {
  cloud: boolean;
  faultRate: number;
  latencyMs: number;
  /** Only with cloud: the credentials the token endpoint accepts (CLOUD_API_CREDENTIALS in sandbox mode). */
  cloudCredentials?: unknown;
  /** Only with cloud: where its answers put the id, the token and an IP's address (SANDBOX_CLOUD_SHAPE). */
  cloudShape?: CloudResponseShape;
  /** Identification PRODUCTION and PRODLIKE, two servers on two addresses. */
  identification?: boolean;
  /** Verification with its results and callbacks, and the rfm check. */
  verification?: boolean;
  /** Delay before the verification sandbox completes a registration and calls back. */
  callbackDelayMs?: number;
  /** The mobile identity service: a signing key, its JWKS, and notifications POSTed to the gateway. */
  mobileId?: boolean;
  /** The client_notification_token the mobile-ID sandbox's notifications may carry (see startMobileIdSandbox). */
  mobileIdNotificationToken?: string;
}

/** The simulators the gateway started in-process, each a real HTTP server on loopback. */
export interface Sandboxes {
  readonly cloud: CloudSandbox | null;
  readonly identification: IdentificationSandbox | null;
  readonly identificationProdlike: IdentificationSandbox | null;
  readonly verification: VerificationSandbox | null;
  readonly mobileId: MobileIdSandbox | null;
  close(): Promise<void>;
}

export async function startSandboxes(options: SandboxOptions): Promise<Sandboxes> {
  const cloud = options.cloud
    ? await startCloudSandbox({
        faultRate: options.faultRate,
        latencyMs: options.latencyMs,
        ...(options.cloudCredentials ? { acceptedCredentials: options.cloudCredentials } : {}),
        ...(options.cloudShape ? { responseShape: options.cloudShape } : {}),
      })
    : null;
  const faults = { faultRate: options.faultRate, latencyMs: options.latencyMs };
  const identification = options.identification
    ? await startIdentificationSandbox({ ...faults, environment: 'production' })
    : null;
  const identificationProdlike = options.identification
    ? await startIdentificationSandbox({ ...faults, environment: 'prodlike' })
    : null;
  const verification = options.verification
    ? await startVerificationSandbox({
        ...faults,
        ...(options.callbackDelayMs !== undefined ? { callbackDelayMs: options.callbackDelayMs } : {}),
      })
    : null;
  const mobileId = options.mobileId
    ? await startMobileIdSandbox(
        options.mobileIdNotificationToken ? { notificationToken: options.mobileIdNotificationToken } : {},
      )
    : null;
  return {
    cloud,
    mobileId,
    identification,
    identificationProdlike,
    verification,
    async close() {
      await cloud?.close();
      await Promise.all([
        identification?.close(),
        identificationProdlike?.close(),
        verification?.close(),
        mobileId?.close(),
      ]);
    },
  };
}
