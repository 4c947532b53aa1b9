// The guard's planted spin sizes itself from its last spins (bench/lib/spin-rate.ts). A spin that another thread
// preempted reads many times its ask; the spins after it must still spend theirs, and the window must let it go.
import { describe, expect, it } from 'vitest';

import { RECENT, SpinRate } from '../../bench/lib/spin-rate.js';

/** A hash that runs 0.3 blocks a µs: a spin of `blocks` takes blocks / 0.3 µs. */
const TRUE_RATE = 0.3;
const ASK_US = 40;
const NORMAL = Math.round(ASK_US * TRUE_RATE);

/** `count` spins of the ask, each timed as the true rate says times `slowed(i)`; returns the blocks each hashed. */
function spins(rate: SpinRate, count: number, slowed: (i: number) => number = () => 1): number[] {
  return Array.from({ length: count }, (_, i) => {
    const blocks = rate.blocksFor(ASK_US);
    rate.record(blocks, (blocks / TRUE_RATE) * slowed(i));
    return blocks;
  });
}

describe('the planted spin’s rate', () => {
  it('settles on the rate its spins are timed at, from a first rate twice too fast', () => {
    const rate = new SpinRate(2 * TRUE_RATE);
    spins(rate, 4 * RECENT);
    expect(rate.rate).toBeCloseTo(TRUE_RATE, 6);
    expect(rate.blocksFor(ASK_US)).toBe(NORMAL);
  });

  it('a spin read 80 times its ask leaves the next spins as they were', () => {
    const rate = new SpinRate(TRUE_RATE);
    spins(rate, RECENT);
    // 3,205 µs for an ask of 40 µs, as one gateway read in a run of the full suite: counted whole in a sum of the
    // window, it shrank the next spins to two blocks, then fewer.
    const after = spins(rate, RECENT + 1, (i) => (i === 0 ? 80 : 1));
    expect(after).toEqual(Array.from({ length: RECENT + 1 }, () => NORMAL));
    expect(rate.rate).toBeCloseTo(TRUE_RATE, 6);
  });

  it('spins one in eight of which another thread preempted still spend their ask', () => {
    const rate = new SpinRate(TRUE_RATE);
    // Each eighth spin reads three times its time: a mean of the window would count a quarter more time a block and
    // hash a fifth fewer blocks (10 for 12).
    const blocks = spins(rate, 8 * RECENT, (i) => (i % 8 === 7 ? 3 : 1));
    expect(blocks.slice(RECENT)).toEqual(Array.from({ length: 7 * RECENT }, () => NORMAL));
  });

  it('spins five in eight of which the other side preempted still spend their ask', () => {
    const rate = new SpinRate(TRUE_RATE);
    // Both sides of a pair share one core: where the other side's gateway wakes in most spins, each of those reads
    // 1.7 times its time. The median of the window would hash 7 blocks for 12 (the planted delivery read 1.030 on CI).
    const blocks = spins(rate, 8 * RECENT, (i) => (i % 8 < 5 ? 1.7 : 1));
    expect(blocks.slice(RECENT)).toEqual(Array.from({ length: 7 * RECENT }, () => NORMAL));
  });

  it('spins nine in ten of which an interrupt lengthened a little still spend their ask', () => {
    const rate = new SpinRate(TRUE_RATE);
    // Interrupts on the core (the loopback's packets for either side) fall in most spins and lengthen each a little:
    // the lower quartile would hash 9 blocks for 12.
    const blocks = spins(rate, 8 * RECENT, (i) => (i % 10 < 9 ? 1.3 : 1));
    expect(blocks.slice(RECENT)).toEqual(Array.from({ length: 7 * RECENT }, () => NORMAL));
  });

  it('hashes at least one block for any ask, so that every spin is timed', () => {
    const rate = new SpinRate(TRUE_RATE);
    expect(rate.blocksFor(0.1)).toBe(1);
  });
});
