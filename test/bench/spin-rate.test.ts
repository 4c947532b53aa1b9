// The guard's planted spin sizes itself from its last spins (bench/lib/spin-rate.ts). One spin that another thread
// preempted reads many times its ask; the spins after it must still spend theirs, and the window must let it go.
import { describe, expect, it } from 'vitest';

import { RECENT, SpinRate } from '../../bench/lib/spin-rate.js';

/** A hash that runs 0.3 blocks a µs: a spin of `blocks` takes blocks / 0.3 µs. */
const TRUE_RATE = 0.3;
const ASK_US = 40;

/** `count` spins of the ask, each timed as the true rate says; returns the blocks each hashed. */
function spins(rate: SpinRate, count: number): number[] {
  return Array.from({ length: count }, () => {
    const blocks = rate.blocksFor(ASK_US);
    rate.record(blocks, blocks / TRUE_RATE);
    return blocks;
  });
}

describe('the planted spin’s rate', () => {
  it('settles on the rate its spins are timed at, from a first rate twice too fast', () => {
    const rate = new SpinRate(2 * TRUE_RATE);
    spins(rate, 4 * RECENT);
    expect(rate.rate).toBeCloseTo(TRUE_RATE, 2);
    expect(rate.blocksFor(ASK_US)).toBe(Math.round(ASK_US * TRUE_RATE));
  });

  it('a spin read 80 times its ask shrinks the next spins by a tenth at most, and leaves the window', () => {
    const rate = new SpinRate(TRUE_RATE);
    spins(rate, RECENT);
    const blocks = rate.blocksFor(ASK_US);
    // 3,205 µs for an ask of 40 µs, as one gateway read in a run of the full suite.
    rate.record(blocks, 80 * (blocks / TRUE_RATE));
    const after = spins(rate, RECENT);
    const normal = Math.round(ASK_US * TRUE_RATE);
    // Counted at most DISTURBED (3) times its expectation, the reading shrinks the next spins by about a tenth, not
    // to nothing (counted whole: to two blocks, then fewer, and spins of none were never timed again).
    expect(Math.min(...after)).toBeGreaterThanOrEqual(0.8 * normal);
    // RECENT spins later it is out of the window.
    expect(rate.blocksFor(ASK_US)).toBe(normal);
    expect(rate.rate).toBeCloseTo(TRUE_RATE, 6);
  });

  it('hashes at least one block for any ask, so that every spin is timed', () => {
    const rate = new SpinRate(TRUE_RATE);
    expect(rate.blocksFor(0.1)).toBe(1);
  });
});
