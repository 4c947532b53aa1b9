import { describe, expect, it } from 'vitest';

import { M } from '../helpers/cloud.js';
import { startTestGateway } from '../helpers/gateway.js';

describe('graceful shutdown', () => {
  it('lets an in-flight mutation finish before closing', async () => {
    const gw = await startTestGateway();
    // The upstream holds the mutation's call until the gateway has stopped accepting: in flight by construction.
    const held = gw.gateway.sandbox.cloud!.faults.hold();
    const inFlight = gw.graphql(M.project, { input: { name: 'draining' } });
    await expect.poll(() => held.arrived(), { timeout: 20_000 }).toBeGreaterThan(0);
    const closed = gw.close();
    await expect.poll(() => gw.gateway.server.listening, { timeout: 20_000 }).toBe(false);
    held.release();
    const res = await inFlight;
    expect(res.status).toBe(200);
    expect(res.errors).toBeUndefined();
    expect(res.data!.createProject.project.id).toBeTruthy();
    await closed;
    await expect(fetch(`${gw.url}/healthz`)).rejects.toThrow();
  });
});
