import { queryObjects } from 'node:v8';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';

import { GatewayServer } from '../../src/gateway/listen.js';
import { Metrics } from '../../src/metrics.js';
import { startTestGateway } from '../helpers/gateway.js';

/** Live gateways and gateway metrics after a full collection (queryObjects collects first). */
const live = () => [queryObjects(GatewayServer, { format: 'count' }), queryObjects(Metrics, { format: 'count' })];

/**
 * Starts three gateways, reads each one's /metrics while all three run, and closes them. A function of its own, so that
 * nothing of the gateways stays in the test's frame once it returns.
 */
async function threeGateways(base: number[]): Promise<void> {
  const gateways = [await startTestGateway(), await startTestGateway(), await startTestGateway()];
  // The count sees them while they run: the check after the close can fail.
  expect(live()).toEqual(base.map((n) => n + 3));
  for (const gw of gateways) {
    const res = await request(`${gw.url}/metrics`);
    expect(res.statusCode).toBe(200);
    const text = await res.body.text();
    expect(text).toContain('\ngateway_process_cpu_seconds_total ');
    expect(text).toMatch(/\ngateway_nodejs_eventloop_lag_seconds \d/);
    expect(text).toContain('\n# TYPE gateway_nodejs_gc_duration_seconds histogram');
    expect(text).toContain('\n# TYPE gateway_http_request_duration_seconds histogram');
  }
  for (const gw of gateways) await gw.close();
}

// The suite's files share their worker processes (vitest.config.ts): what a closed gateway leaves alive stays for every
// file after it in that worker, and grows with each gateway the worker starts. This file itself runs in a process of
// its own (ISOLATED_TESTS): its heap counts are slow over the heap a shared worker inherits.
describe('a closed gateway', () => {
  it('is released, metrics and all, while every gateway of the process shows the process metrics', async () => {
    // What earlier files and tests left is the base.
    const base = live();
    await threeGateways(base);
    expect(live()).toEqual(base);
  });
});
