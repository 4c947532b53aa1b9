import type { TestGateway } from './gateway.js';

type Listeners = Map<string, Set<unknown>>;

/**
 * Resolves once a subscription for events of `kind` is registered on the gateway's event bus, so that an
 * event published from then on reaches it live: the event, not a duration, a test waits for before it
 * publishes. No public API says "subscribed", so this reads the bus's listener table (the in-process bus,
 * or the one inside the PostgreSQL bus).
 */
export async function waitForListener(gw: TestGateway, kind: string, timeoutMs = 20_000): Promise<void> {
  const bus = gw.gateway.services.events.bus as unknown as { listeners?: Listeners; local?: { listeners: Listeners } };
  const listeners = bus.listeners ?? bus.local?.listeners;
  if (!listeners) throw new Error('waitForListener: the event bus has no listener table this helper knows');
  const deadline = Date.now() + timeoutMs;
  while (![...listeners].some(([slot, set]) => slot.startsWith(`${kind}\u0000`) && set.size > 0)) {
    if (Date.now() > deadline) throw new Error(`no subscription for ${kind} events after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 5));
  }
}
