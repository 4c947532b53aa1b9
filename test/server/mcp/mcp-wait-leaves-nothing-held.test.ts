// A wait_for_events call ends on any of several signals: the request's, the token's expiry, a reload, and the
// gateway's shutdown, whose signal lives as long as the gateway. Joined with AbortSignal.any, every call left an entry
// on that long-lived signal (its set of dependent signals), which Node 20 never prunes: memory held for good per call,
// so an agent polling wait_for_events grew the gateway without bound. A call now leaves nothing on the gateway's
// long-lived signals: no such entry, and no listener once it has ended. The signals are the ones the gateway made while
// it started (recorded by a subclass of AbortController in force during the start); the set is Node's own (its symbol
// `kDependantSignals`), checked first to be where AbortSignal.any records its dependents, so that the test cannot pass
// by looking in the wrong place.
import { getEventListeners } from 'node:events';
import { afterEach, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../../helpers/gateway.js';
import { mcpClient, type TestMcpClient } from '../../helpers/mcp.js';
import { waitForSubscribers } from '../../helpers/wait.js';

const KEY = 'key-wait-held-0123456789';

/** How many dependent signals AbortSignal.any has recorded on `signal` (0 when none). */
function dependants(signal: AbortSignal): number {
  const symbol = Object.getOwnPropertySymbols(signal).find((s) => s.description === 'kDependantSignals');
  const set = symbol === undefined ? undefined : (signal as unknown as Record<symbol, { size: number }>)[symbol];
  return set?.size ?? 0;
}

/** What a signal holds for others: the dependents AbortSignal.any recorded on it, and its abort listeners. */
const held = (signal: AbortSignal) => dependants(signal) + getEventListeners(signal, 'abort').length;

const opened: { gw?: TestGateway; app?: TestMcpClient }[] = [];
afterEach(async () => {
  for (const { gw, app } of opened.splice(0)) {
    await app?.close().catch(() => undefined);
    await gw?.close();
  }
});

/** A gateway and an MCP client of its app, and every signal of an AbortController the gateway made while it started. */
async function started(): Promise<{ gw: TestGateway; app: TestMcpClient; made: AbortSignal[] }> {
  const made: AbortSignal[] = [];
  const Plain = globalThis.AbortController;
  globalThis.AbortController = class Recorded extends Plain {
    constructor() {
      super();
      made.push(this.signal);
    }
  };
  const entry: (typeof opened)[number] = {};
  opened.push(entry);
  try {
    entry.gw = await startTestGateway({ GATEWAY_API_KEYS: `waiter:${KEY}` });
  } finally {
    globalThis.AbortController = Plain;
  }
  entry.app = await mcpClient(entry.gw, { key: KEY });
  expect(made.length, 'the gateway made its long-lived signals while it started').toBeGreaterThan(0);
  return { gw: entry.gw, app: entry.app, made };
}

describe('wait_for_events', () => {
  it("leaves nothing on the gateway's long-lived signals, call after call", async () => {
    // Where Node records what AbortSignal.any joins to a signal: the count below reads it there.
    const probe = new AbortController();
    const joined = AbortSignal.any([probe.signal]);
    expect(dependants(probe.signal), 'AbortSignal.any records its dependents where the test looks').toBe(1);
    expect(joined.aborted).toBe(false);

    const { app, made } = await started();
    const before = made.map(held);
    let cursor: string | undefined;
    for (let i = 0; i < 40; i++) {
      const result = await app.call('wait_for_events', { timeoutSeconds: 0, ...(cursor ? { cursor } : {}) });
      expect(result.isError, JSON.stringify(result.content)).toBeFalsy();
      cursor = result.structuredContent!.cursor as string;
    }
    const grown = made.map((signal, i) => held(signal) - before[i]!).filter((n) => n !== 0);
    expect(grown, 'what the calls left on long-lived signals').toEqual([]);
  });

  it('calls waiting at once, more than Node warns past, end at shutdown with no warning and nothing left', async () => {
    const warnings: Error[] = [];
    const warned = (w: Error) => warnings.push(w);
    process.on('warning', warned);
    try {
      const { gw, app, made } = await started();
      const before = made.map(held);
      const waits = Array.from({ length: 12 }, () =>
        app.call('wait_for_events', { kinds: ['verification'], timeoutSeconds: 300 }),
      );
      // Each waiting call listens on the bus for its kind: all twelve wait.
      await waitForSubscribers(gw, 'verification', undefined, 12);
      await gw.close();
      for (const result of await Promise.all(waits)) {
        expect(result.isError, JSON.stringify(result.content)).toBeFalsy();
        expect(result.structuredContent).toMatchObject({ events: [], timedOut: false });
      }
      const grown = made.map((signal, i) => held(signal) - before[i]!).filter((n) => n !== 0);
      expect(grown, 'what the calls left on long-lived signals').toEqual([]);
      expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning')).toEqual([]);
    } finally {
      process.off('warning', warned);
    }
  });
});
