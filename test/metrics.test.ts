import fc from 'fast-check';
import { Counter, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';

import { LabelledCounter, LabelledHistogram } from '../src/metrics.js';

/**
 * The request and upstream attempt histograms are the gateway's own LabelledHistogram, and the webhook and event
 * counters its LabelledCounter, not prom-client's: what `/metrics` writes of them (and the registry's JSON) must stay
 * what prom-client's Histogram and Counter give for the same observations, or dashboards and alerts over
 * gateway_http_request_duration_seconds, gateway_webhooks_total and the others would read other figures.
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

describe('LabelledCounter', () => {
  const COUNTED = ['endpoint', 'outcome'] as const;
  function counters() {
    const theirs = new Registry();
    const ours = new Registry();
    const reference = new Counter({
      name: 'c_total',
      help: 'a count, by endpoint and outcome',
      labelNames: COUNTED,
      registers: [theirs],
    });
    const counter = new LabelledCounter('c_total', 'a count, by endpoint and outcome', COUNTED, ours);
    return {
      theirs,
      ours,
      reference,
      counter,
      inc(l: readonly [string, string], by?: number) {
        reference.inc({ endpoint: l[0], outcome: l[1] }, by);
        counter.inc(l, by);
      },
    };
  }
  const counted = fc.tuple(
    fc.constantFrom('mobile-id', 'verification'),
    fc.constantFrom('accepted', 'a"b\\c\nd', 'duplicate'),
  );

  it('writes what prom-client writes for the same counts, text and JSON', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.tuple(
            counted,
            fc.option(fc.oneof(fc.nat(1000), fc.double({ min: 0.5, max: 1e6, noNaN: true })), { nil: undefined }),
          ),
          {
            maxLength: 60,
          },
        ),
        async (counts) => {
          const p = counters();
          for (const [l, by] of counts) p.inc(l, by);
          expect(await p.ours.metrics()).toBe(await p.theirs.metrics());
          expect(await p.ours.getMetricsAsJSON()).toEqual(await p.theirs.getMetricsAsJSON());
        },
      ),
      { numRuns: 200 },
    );
  });

  it('counts one by default, and the amount given', async () => {
    const p = counters();
    p.inc(['mobile-id', 'accepted']);
    p.inc(['mobile-id', 'accepted'], 2);
    p.inc(['verification', 'duplicate']);
    const text = await p.ours.metrics();
    expect(text).toContain('c_total{endpoint="mobile-id",outcome="accepted"} 3');
    expect(text).toContain('c_total{endpoint="verification",outcome="duplicate"} 1');
    expect(text).toBe(await p.theirs.metrics());
  });

  it('refuses a negative or infinite amount, as prom-client does, and counts nothing', async () => {
    const p = counters();
    p.inc(['mobile-id', 'accepted']);
    expect(() => p.counter.inc(['mobile-id', 'accepted'], -1)).toThrow('It is not possible to decrease a counter');
    expect(() => p.reference.inc({ endpoint: 'mobile-id', outcome: 'accepted' }, -1)).toThrow(
      'It is not possible to decrease a counter',
    );
    expect(() => p.counter.inc(['mobile-id', 'accepted'], Number.POSITIVE_INFINITY)).toThrow(TypeError);
    expect(() => p.reference.inc({ endpoint: 'mobile-id', outcome: 'accepted' }, Number.POSITIVE_INFINITY)).toThrow(
      TypeError,
    );
    expect(await p.ours.metrics()).toContain('c_total{endpoint="mobile-id",outcome="accepted"} 1');
    expect(await p.ours.metrics()).toBe(await p.theirs.metrics());
  });

  it('is emptied by the registry reset, as prom-client is, and with default labels gives the same JSON', async () => {
    const p = counters();
    p.inc(['mobile-id', 'accepted']);
    p.ours.resetMetrics();
    p.theirs.resetMetrics();
    expect(await p.ours.metrics()).toBe(await p.theirs.metrics());
    expect(await p.ours.metrics()).not.toContain('c_total{');
    p.inc(['verification', 'accepted'], 4);
    for (const r of [p.ours, p.theirs]) r.setDefaultLabels({ instance: 'gw-1' });
    expect(await p.ours.metrics()).toBe(await p.theirs.metrics());
    expect(await p.ours.getMetricsAsJSON()).toEqual(await p.theirs.getMetricsAsJSON());
    // The registry's JSON adds the default labels to copies: the next text is still the counter's own.
    expect(await p.ours.metrics()).toBe(await p.theirs.metrics());
  });
});
