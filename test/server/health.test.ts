import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { MOBILE_ID_EVENT_KIND } from '../../src/mobile-id/stored.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { postNotification } from '../helpers/mobile-id.js';
import { waitFor } from '../helpers/wait.js';

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

  it('counts webhook deliveries, published events and every request by route and status in /metrics', async () => {
    const metrics = async () => (await request(`${gw.url}/metrics`)).body.text();
    const notification = { auth_req_id: 'metrics-1', error: 'access_denied', error_description: 'declined' };
    for (const expected of [204, 204, 409]) {
      const res = await postNotification(
        gw,
        expected === 409 ? { ...notification, error: 'expired_token' } : notification,
      );
      expect(res.status, res.text).toBe(expected);
    }
    await request(`${gw.url}/nope`).then((r) => r.body.dump());
    // The event is published after the 204 is written: wait for its count.
    const text = await waitFor(
      async () => {
        const t = await metrics();
        return t.includes(`gateway_events_published_total{kind="${MOBILE_ID_EVENT_KIND}"}`) && t;
      },
      20_000,
      'the published event counted',
    );
    expect(text).toContain(`gateway_events_published_total{kind="${MOBILE_ID_EVENT_KIND}"} 1`);
    expect(text).toContain('gateway_webhooks_total{endpoint="mobile-id",outcome="accepted"} 1');
    expect(text).toContain('gateway_webhooks_total{endpoint="mobile-id",outcome="duplicate"} 1');
    expect(text).toContain('gateway_webhooks_total{endpoint="mobile-id",outcome="conflict"} 1');
    expect(text).toMatch(
      /gateway_http_request_duration_seconds_count\{route="POST \/webhooks\/mobile-id",status="204"\} 2\n/,
    );
    expect(text).toMatch(
      /gateway_http_request_duration_seconds_bucket\{le="\+Inf",route="POST \/webhooks\/mobile-id",status="409"\} 1\n/,
    );
    expect(text).toMatch(/gateway_http_request_duration_seconds_count\{route="not-found",status="404"\} 1\n/);
  });

  it('answers an unknown route with 404 JSON and carries a request id', async () => {
    const res = await request(`${gw.url}/nope`, { headers: { 'x-request-id': 'abc-123' } });
    expect(res.statusCode).toBe(404);
    expect(res.headers['x-request-id']).toBe('abc-123');
    await res.body.dump();
  });
});
