// A subscription counted as one of its app's live ones (APP_LIVE_SUBSCRIPTIONS) is given back on every way out of the
// pipeline, also when the context factory throws for a transport that left the context to the pipeline.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { OPEN_CALLER } from '../../src/auth/caller.js';
import { loadConfig } from '../../src/config/index.js';
import { buildPipeline, gatewaySchema } from '../../src/gateway/pipeline.js';
import { TRACING_OFF } from '../../src/telemetry/tracing.js';
import { startTestGateway, tempDataDir, type TestGateway } from '../helpers/gateway.js';

describe('a live subscription whose context cannot be made', () => {
  let gw: TestGateway;
  const closes: Array<() => Promise<void>> = [];
  beforeAll(async () => {
    gw = await startTestGateway({ APP_LIVE_SUBSCRIPTIONS: '1' });
  });
  afterAll(async () => {
    for (const close of closes) await close();
    await gw.close();
  });

  it('gives its place back when the context factory throws, so the app may subscribe again', async () => {
    const { services } = gw.gateway;
    const failure = new Error('the context factory failed');
    // The gateway's own pipeline, over its services, with a context factory that fails.
    const built = await buildPipeline(loadConfig({ DATA_DIR: tempDataDir(), APP_LIVE_SUBSCRIPTIONS: '1' }), {
      schema: gatewaySchema(),
      services,
      logger: gw.gateway.logger,
      tracing: TRACING_OFF,
      trusted: undefined,
      contextFor: () => {
        throw failure;
      },
      directPath: false,
      onClose: (close) => void closes.push(close),
    });
    const subscribe = () =>
      built.pipeline.runOperation({
        caller: OPEN_CALLER,
        params: { query: 'subscription { mobileIdAuthentication(authReqId: "ctx-1") { __typename } }' },
        transport: 'ws',
        requestId: 'ws:ctx',
        allow: ['subscription'] as never,
      });
    await expect(subscribe()).rejects.toBe(failure);
    expect(services.liveSubscriptions.of(OPEN_CALLER.scope)).toBe(0);
    // The bound is 1: a place kept by the failure would refuse this one RATE_LIMITED instead of reaching the factory.
    await expect(subscribe()).rejects.toBe(failure);
    expect(services.liveSubscriptions.of(OPEN_CALLER.scope)).toBe(0);
  });
});
