import fc from 'fast-check';
import { Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';

import { LabelledHistogram } from '../src/metrics.js';

/**
 * The upstream attempts' histogram is the gateway's own LabelledHistogram, not prom-client's Histogram: what `/metrics`
 * writes of it (and the registry's JSON) must stay what prom-client's Histogram gives for the same observations, or
 * dashboards and alerts over gateway_upstream_request_duration_seconds would read other figures.
 */
const BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const NAMES = ['upstream', 'route', 'status'] as const;

function pair() {
  const theirs = new Registry();
  const ours = new Registry();
  const reference = new Histogram({
    name: 'h_seconds',
    help: 'a duration, by upstream, route and status',
    labelNames: NAMES,
    buckets: BUCKETS,
    registers: [theirs],
  });
  const histogram = new LabelledHistogram(
    'h_seconds',
    'a duration, by upstream, route and status',
    NAMES,
    BUCKETS,
    ours,
  );
  return {
    theirs,
    ours,
    reference,
    histogram,
    observe(labels: readonly [string, string, string], value: number) {
      reference.observe({ upstream: labels[0], route: labels[1], status: labels[2] }, value);
      histogram.observe(labels, value);
    },
  };
}

/** Values on every bound, just beside them, below the first, above the last, and zero. */
const value = fc.oneof(
  fc.constantFrom(...BUCKETS, 0, 1e-9, 11, 1e6),
  fc.constantFrom(...BUCKETS).map((b) => b * (1 + 1e-12)),
  fc.double({ min: 0, max: 20, noNaN: true }),
);
const labels = fc.tuple(
  fc.constantFrom('cloud', 'identity'),
  fc.constantFrom('POST /ocs/v1/services', 'GET /a"b\\c\nd'),
  fc.constantFrom('200', '201', 'UND_ERR_SOCKET'),
);

describe('LabelledHistogram', () => {
  it('writes what prom-client writes for the same observations, text and JSON', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.tuple(labels, value), { maxLength: 60 }), async (observations) => {
        const p = pair();
        for (const [l, v] of observations) p.observe(l, v);
        expect(await p.ours.metrics()).toBe(await p.theirs.metrics());
        expect(await p.ours.getMetricsAsJSON()).toEqual(await p.theirs.getMetricsAsJSON());
      }),
      { numRuns: 200 },
    );
  });

  it('counts a value into the first bucket whose bound it does not exceed, and every one above it', async () => {
    const p = pair();
    p.observe(['cloud', 'r', '200'], 0.0025);
    p.observe(['cloud', 'r', '200'], 0.0026);
    p.observe(['cloud', 'r', '200'], 99);
    const text = await p.ours.metrics();
    expect(text).toContain('h_seconds_bucket{le="0.001",upstream="cloud",route="r",status="200"} 0');
    expect(text).toContain('h_seconds_bucket{le="0.0025",upstream="cloud",route="r",status="200"} 1');
    expect(text).toContain('h_seconds_bucket{le="0.005",upstream="cloud",route="r",status="200"} 2');
    expect(text).toContain('h_seconds_bucket{le="10",upstream="cloud",route="r",status="200"} 2');
    expect(text).toContain('h_seconds_bucket{le="+Inf",upstream="cloud",route="r",status="200"} 3');
    expect(text).toContain('h_seconds_count{upstream="cloud",route="r",status="200"} 3');
    expect(text).toBe(await p.theirs.metrics());
  });

  it('refuses a value that is not a finite number, as prom-client does, and counts nothing', async () => {
    const p = pair();
    p.observe(['cloud', 'r', '200'], 0.01);
    for (const bad of [Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() => p.histogram.observe(['cloud', 'r', '200'], bad)).toThrow(TypeError);
      expect(() => p.reference.observe({ upstream: 'cloud', route: 'r', status: '200' }, bad)).toThrow(TypeError);
    }
    expect(await p.ours.metrics()).toContain('h_seconds_count{upstream="cloud",route="r",status="200"} 1');
    expect(await p.ours.metrics()).toBe(await p.theirs.metrics());
  });

  it('is emptied by the registry reset, as prom-client is', async () => {
    const p = pair();
    p.observe(['cloud', 'r', '200'], 0.01);
    p.ours.resetMetrics();
    p.theirs.resetMetrics();
    expect(await p.ours.metrics()).toBe(await p.theirs.metrics());
    expect(await p.ours.metrics()).not.toContain('h_seconds_count');
    p.observe(['identity', 'r', '201'], 0.2);
    expect(await p.ours.metrics()).toBe(await p.theirs.metrics());
  });

  it('refuses buckets that are not in increasing order', () => {
    expect(() => new LabelledHistogram('x', 'x', ['a'], [0.1, 0.05], new Registry())).toThrow(/increasing order/);
    expect(() => new LabelledHistogram('x', 'x', ['a'], [0.1, 0.1], new Registry())).toThrow(/increasing order/);
  });
});
