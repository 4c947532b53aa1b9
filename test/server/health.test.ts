import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

describe('health, readiness and metrics', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway();
  });
  afterAll(() => gw.close());

  it('answers /healthz and /readyz (which checks the store)', async () => {
    const health = await request(`${gw.url}/healthz`);
    expect(health.statusCode).toBe(200);
    expect(await health.body.json()).toEqual({ status: 'ok' });
    const ready = await request(`${gw.url}/readyz`);
    expect(ready.statusCode).toBe(200);
    expect(await ready.body.json()).toMatchObject({ status: 'ready', store: 'sqlite' });
  });

  it('reports upstream latency by upstream, route and status in /metrics', async () => {
    const res = await gw.graphql('mutation { createProject(input: { name: "m" }) { project { id } } }');
    expect(res.errors).toBeUndefined();
    const text = await (await request(`${gw.url}/metrics`)).body.text();
    expect(text).toMatch(
      /gateway_upstream_request_duration_seconds_count\{upstream="cloud",route="POST \/apis\/projects\/public\/v4\/projects",status="201"\} 1/,
    );
  });

  it('answers an unknown route with 404 JSON and carries a request id', async () => {
    const res = await request(`${gw.url}/nope`, { headers: { 'x-request-id': 'abc-123' } });
    expect(res.statusCode).toBe(404);
    expect(res.headers['x-request-id']).toBe('abc-123');
    await res.body.dump();
  });
});
