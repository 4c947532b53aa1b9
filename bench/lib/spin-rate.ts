/**
 * How many blocks the guard's planted spin (bench/lib/guard-hooks.ts) hashes for an ask of so many µs: the fastest µs a
 * block took in its last RECENT to 2 × RECENT spins, each timed after the fact on the wall clock. A spin that another
 * thread, another process, the host or an interrupt preempted reads long (one read 80 times its ask), never short, so
 * the fastest spin of the window is one nobody preempted, however many were. In a census of a planted delivery run on
 * this machine, 5-13 % of the spins read over 1.3 times the window's lower quartile, and the others lay within a few
 * per cent of each other (2.23 µs a block at the 5th percentile, 2.29 at the median): sized from the fastest, a spin
 * hashes at most that much more than its ask. The median (decision 133) let the preempted spins in as soon as they were
 * half of the window, the lower quartile (decision 140) once they were three quarters: both sides of a pair then ran at
 * once on one core, whose interrupts (the loopback's packets for either side) fell in the spins too, and the planted
 * webhook paths read 1.017-1.031 under both (most of that loss was the sides' interleaving: decision 144). A mean of
 * the window (decision 132's, each spin bounded at three times its expectation) hashed 3-4 % less, and the one before
 * it (no bound) hashed nothing for 1,236 spins after the one of 80 times. The window is two halves, each keeping only
 * its fastest, so that a spin costs the hook a comparison, not a sort: what the hook does beyond the timed spin is part
 * of the plant, on the working tree's side alone. No clock, no I/O: the hook times the spins, this only counts.
 */
export const RECENT = 64;

export class SpinRate {
  /** The fastest µs a block took in the current half of the window, and in the half before it. */
  private fastest = Infinity;
  private fastestBefore = Infinity;
  /** Spins recorded in the current half. */
  private count = 0;

  /** `blocksPerUs`: a first rate, from a timing taken while the process is idle (0 until then). */
  constructor(private blocksPerUs = 0) {}

  get rate(): number {
    return this.blocksPerUs;
  }

  /** Sets a first rate, before any spin is recorded (the hook times one while the gateway is idle, once). */
  seed(blocksPerUs: number): void {
    this.blocksPerUs = blocksPerUs;
  }

  /** The blocks to hash for an ask of `us` µs: at least one, so that every spin is timed. */
  blocksFor(us: number): number {
    return Math.max(1, Math.round(us * this.blocksPerUs));
  }

  /** Counts a spin of `blocks` blocks that took `us` µs. */
  record(blocks: number, us: number): void {
    this.fastest = Math.min(this.fastest, us / blocks);
    if (++this.count === RECENT) {
      this.fastestBefore = this.fastest;
      this.fastest = Infinity;
      this.count = 0;
    }
    const usPerBlock = Math.min(this.fastest, this.fastestBefore);
    if (usPerBlock > 0 && Number.isFinite(usPerBlock)) this.blocksPerUs = 1 / usPerBlock;
  }
}
