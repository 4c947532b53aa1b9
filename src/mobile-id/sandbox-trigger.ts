// The sandbox trigger: in sandbox mode an app asks the simulated mobile identity service to end an
// authentication, and it sends the gateway's own webhook the notification the real service would send.
import type { Caller } from '../auth/caller.js';
import { ErrorCode, GatewayError } from '../errors.js';
import { checkAuthReqId } from './stored.js';
import type { NotificationTokens } from './tokens.js';
import type { FailureReason } from './wire.js';

/** The sandbox outcomes `sandboxComplete` can ask for: success, or a row of the spec's error table. */
export type SandboxOutcome = 'SUCCESS' | Exclude<FailureReason, 'UNKNOWN'>;

/** What the service needs of the mobile-ID sandbox (src/sandbox/mobile-id.ts): its keys, and POST one notification. */
export interface SandboxNotifier {
  readonly jwksUrl: string;
  readonly issuer: string;
  readonly clientId: string;
  /** The client_notification_token the sandbox gateway accepts from anyone. */
  readonly notificationToken: string;
  notify(options: {
    notificationUri: string;
    token: string;
    authReqId: string;
    outcome: SandboxOutcome;
  }): Promise<{ status: number; body: string }>;
}

export interface SandboxDelivery {
  authReqId: string;
  outcome: SandboxOutcome;
  httpStatus: number;
  accepted: boolean;
  response: string | null;
}

export class SandboxTrigger {
  constructor(
    /** Null outside sandbox mode. */
    private readonly sandbox: SandboxNotifier | null,
    private readonly tokens: NotificationTokens,
    /** The gateway's own notification_uri (known once it listens). */
    private readonly notificationUri: () => string,
  ) {}

  /**
   * The sandbox sends the gateway's own endpoint, over HTTP, the notification the real service
   * would send at the end of authentication `authReqId`, authenticated with a token issued here for it.
   */
  async complete(caller: Caller, authReqId: string, outcome: SandboxOutcome): Promise<SandboxDelivery> {
    const sandbox = this.sandbox;
    if (!sandbox) {
      throw new GatewayError(
        ErrorCode.BAD_USER_INPUT,
        'sandboxCompleteMobileIdAuthentication works only in sandbox mode (MOBILEID_NOTIFICATION_TOKENS and MOBILEID_JWKS_URL/FILE unset); the real mobile identity service sends its notifications itself',
        { sandboxOnly: true },
      );
    }
    checkAuthReqId(authReqId);
    const { token } = await this.tokens.issue(caller, { authReqId, ttlMs: 300_000 });
    const res = await sandbox.notify({ notificationUri: this.notificationUri(), token, authReqId, outcome });
    const accepted = res.status >= 200 && res.status < 300;
    return { authReqId, outcome, httpStatus: res.status, accepted, response: res.body === '' ? null : res.body };
  }
}
