// The guard's verdict on one path from its rounds (bench/lib/guard-verdict.ts, decision 114): "same" only where a 5 %
// loss is ruled out, "slower" where more than 2 % beyond the spread is proven, and no verdict in between; the trimmed
// spread drops one odd round in eight. The rounds of the two CI runs that read a planted 5 % as "same" are here.
import { describe, expect, it } from 'vitest';

import { halfRange, rowOf, type Figures } from '../../bench/lib/guard-verdict.js';

const RULE = { pairs: 2, tolerance: 0.02, sees: 0.05 };

/** Rounds with these ratios (tree over ref), the pairs taking them in turn. */
const rounds = (ratios: number[]): Figures[] => ratios.map((r, i) => ({ tree: 1000 * r, ref: 1000, pair: i % 2 }));

describe("the guard's verdict on a path", () => {
  it('reads a steady 5 % loss as slower', () => {
    const row = rowOf('tree', rounds([1.05, 1.051, 1.049, 1.052, 1.05, 1.048, 1.051, 1.05]), RULE);
    expect(row.ratio).toBeCloseTo(1.05, 3);
    expect(row.spread).toBeLessThan(0.01);
    expect(row.slower).toBe(true);
    expect(row.unresolved).toBe(false);
  });

  it('reads steady rounds of the same cost as the same', () => {
    const row = rowOf('tree', rounds([1.004, 0.998, 1.001, 1.0, 0.996, 1.003, 1.0, 0.999]), RULE);
    expect(row.slower).toBe(false);
    expect(row.unresolved).toBe(false);
  });

  it('reads wide rounds as the same when even their upper end stays under 5 %', () => {
    const row = rowOf('tree', rounds([0.95, 1.03, 0.96, 1.02, 0.97, 1.03, 0.98, 1.01]), RULE);
    expect(row.spread).toBeGreaterThan(0.03);
    expect(row.ratio - 1 + row.spread).toBeLessThan(0.05);
    expect(row.slower).toBe(false);
    expect(row.unresolved).toBe(false);
  });

  it('gives no verdict on CI\'s tree path: one pair 23 % over the other (read 1.112 ± 12.3 %, "same")', () => {
    const row = rowOf('tree', rounds([1.0, 1.25, 0.99, 1.2, 1.01, 1.22, 1.0, 1.24]), RULE);
    expect(row.ratio - 1).toBeLessThan(row.spread + RULE.tolerance);
    expect(row.slower).toBe(false);
    expect(row.unresolved).toBe(true);
  });

  it('gives no verdict on CI\'s intake path on Node 26: rounds drifting up (read 1.032 ± 2.4 %, "same")', () => {
    const row = rowOf('intake', rounds([1.013, 1.026, 0.999, 1.027, 1.061, 1.073, 1.037, 1.047]), RULE);
    expect(row.ratio).toBeCloseTo(1.032, 3);
    expect(row.spread).toBeCloseTo(0.024, 3);
    expect(row.slower).toBe(false);
    expect(row.unresolved).toBe(true);
  });

  it('keeps a verdict of slower however wide the spread', () => {
    const row = rowOf('tree', rounds([1.3, 1.35, 1.32, 1.4, 1.31, 1.36, 1.33, 1.38]), RULE);
    expect(row.spread).toBeGreaterThan(0.03);
    expect(row.slower).toBe(true);
    expect(row.unresolved).toBe(false);
  });

  it('claims nothing about 5 % where the rule does not (the optimising tier)', () => {
    const row = rowOf('tree', rounds([1.0, 1.25, 0.99, 1.2, 1.01, 1.22, 1.0, 1.24]), {
      ...RULE,
      sees: Number.POSITIVE_INFINITY,
    });
    expect(row.slower).toBe(false);
    expect(row.unresolved).toBe(false);
  });

  it('drops the highest and lowest eighth of the rounds from the spread, at least one each way', () => {
    expect(halfRange([1, 1.02, 1.5, 0.5, 1.01, 1.0, 1.01, 1.02])).toBeCloseTo(0.01, 6);
    // Sixteen rounds: two odd ones each way.
    expect(halfRange([...Array(12).fill(1), 1.5, 1.6, 0.5, 0.4])).toBe(0);
    expect(halfRange([1, 1.04, 1.02])).toBeCloseTo(0.02, 6);
  });
});
