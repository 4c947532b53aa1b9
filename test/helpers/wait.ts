import type { ProvisioningRecords } from '../../src/provisioning/records.js';
import type { TestGateway } from './gateway.js';

/**
 * Waits for a state, never for a duration: polls `check` until it returns a value other than undefined or false, and
 * resolves with it. The deadline only bounds a failure (a loaded machine may take long to get there), which names
 * `what`.
 */
export async function waitFor<T>(
  check: () => T | undefined | false | Promise<T | undefined | false>,
  timeoutMs = 20_000,
  what = 'condition',
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/**
 * Listeners the gateway's event bus holds for events of `kind`: of `key` (null: the subscriptions to every key of the
 * kind), or all of them without it (EventBus.subscribers).
 */
export function subscribers(gw: TestGateway, kind: string, key?: string | null): number {
  return gw.gateway.services.events.bus.subscribers(kind, key);
}

/**
 * Resolves once the gateway's event bus holds at least `atLeast` listeners for events of `kind` (of `key`, when
 * given): from then on an event published reaches them live, through the bus, not from the log.
 */
export async function waitForSubscribers(
  gw: TestGateway,
  kind: string,
  key?: string,
  atLeast = 1,
  timeoutMs = 20_000,
): Promise<void> {
  await waitFor(
    () => subscribers(gw, kind, key) >= atLeast,
    timeoutMs,
    `${atLeast} subscriber(s) of ${kind}${key === undefined ? '' : ` ${key}`}`,
  );
}

/**
 * Waits until the provisioning `id`, as `gw` reads it, has gone untouched for longer than `takeoverMs`
 * (IDEMPOTENCY_TAKEOVER): the replica that ran it stopped touching its row, so the app's next call with its key
 * resumes it. A state of the row, waited for, on the wall's clock: for a gateway with no testing clock (one with a
 * testing clock judges on that; its test moves the clock instead).
 */
export async function waitForAbandonedProvisioning(gw: TestGateway, id: string, takeoverMs: number): Promise<void> {
  const records = (gw.gateway.services.provisioning as unknown as { records: ProvisioningRecords }).records;
  await waitFor(
    async () => {
      const row = await records.read(id);
      return row !== null && Date.now() - row.updatedAt.getTime() > takeoverMs;
    },
    20_000,
    'the provisioning abandoned (its row untouched for IDEMPOTENCY_TAKEOVER)',
  );
}
