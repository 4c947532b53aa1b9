import type { Logger } from './logger.js';

/**
 * Named points of a mutation and of webhook intake where the process can be made to stop, for tests only
 * (GATEWAY_TEST_PAUSE_AT; test/faults/crash-phases.test.ts kills the process with SIGKILL there; decision 014):
 * - `mutation-claimed`: the idempotency record is claimed, no upstream call yet;
 * - `upstream-answered`: the cloud upstream created the resource and answered; nothing is in the ledger yet;
 * - `webhook-received`: a mobile-ID notification is read and authenticated; nothing is stored yet;
 * - `webhook-stored`: it is stored; the 204 is not sent yet.
 */
export const PHASES = ['mutation-claimed', 'upstream-answered', 'webhook-received', 'webhook-stored'] as const;
export type Phase = (typeof PHASES)[number];

/** Never resolves for the configured phase; absent (undefined) when no phase is configured, so a call site costs one check. */
export type PauseAt = (phase: Phase) => Promise<void>;

export function pauseAt(phase: Phase | undefined, logger: Logger): PauseAt | undefined {
  if (phase === undefined) return undefined;
  return (reached) => {
    if (reached !== phase) return Promise.resolve();
    logger.warn({ phase }, 'paused at a test phase (GATEWAY_TEST_PAUSE_AT); waiting to be killed');
    return new Promise<void>(() => {});
  };
}
