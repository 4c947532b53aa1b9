import { describe, expect, it } from 'vitest';
import { M } from '../helpers/cloud.js';
import { startTestGateway } from '../helpers/gateway.js';

describe('graceful shutdown', () => {
  it('lets an in-flight mutation finish before closing', async () => {
    const gw = await startTestGateway();
    gw.gateway.sandbox.cloud!.faults.latencyMs = 400;
    const inFlight = gw.graphql(M.project, { input: { name: 'draining' } });
    await new Promise((r) => setTimeout(r, 100));
    const closed = gw.close();
    const res = await inFlight;
    expect(res.status).toBe(200);
    expect(res.errors).toBeUndefined();
    expect(res.data!.createProject.project.id).toBeTruthy();
    await closed;
    await expect(fetch(`${gw.url}/healthz`)).rejects.toThrow();
  });
});
