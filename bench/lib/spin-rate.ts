/**
 * How many blocks the guard's planted spin (bench/lib/guard-hooks.ts) hashes for an ask of so many µs: the time a block
 * took in the fastest quarter of its last RECENT spins, each timed after the fact on the wall clock. A spin that
 * another thread, another process or the host preempted reads long (one read 80 times its ask), never short, so the
 * fast end of the window is where the spins nobody preempted put it, however many were. In a census of a planted
 * delivery run on this machine, 5-13 % of the spins read over 1.3 times the window's lower quartile, and the quartile
 * of the others lay within 1.5 % of their median (2.26 against 2.29 µs a block): sized from the quartile, a spin
 * hashes at most that much more than its ask. The median (decision 133) let the preempted spins in as soon as they
 * were half of the window: both sides of a pair run on one core, and on CI's host the planted delivery read 1.030, its
 * spins 0.6 of their ask. A mean of the window (decision 132's, each spin bounded at three times its expectation)
 * hashed 3-4 % less, and the one before it (no bound) hashed nothing for 1,236 spins after the one of 80 times. No
 * clock, no I/O: the hook times the spins, this only counts.
 */
export const RECENT = 32;

/** The share of the window, from its fastest spin, that sizes the next: its lower quartile. */
const FAST_SHARE = 0.25;

export class SpinRate {
  /** µs a block took in each of the last RECENT spins, oldest overwritten first. */
  private readonly usPerBlock: number[] = [];
  private next = 0;

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
    this.usPerBlock[this.next] = us / blocks;
    this.next = (this.next + 1) % RECENT;
    const sorted = [...this.usPerBlock].sort((a, b) => a - b);
    const usPerBlock = sorted[Math.floor((sorted.length - 1) * FAST_SHARE)]!;
    if (usPerBlock > 0) this.blocksPerUs = 1 / usPerBlock;
  }
}
