import { median } from './stats.js';

/**
 * How many blocks the guard's planted spin (bench/lib/guard-hooks.ts) hashes for an ask of so many µs: the median time
 * a block took in its last RECENT spins, each timed after the fact on the wall clock. A spin that another thread,
 * another process or the host preempted reads long (one read 80 times its ask), and while such spins are fewer than
 * half of the window its median stays where the others put it. In a census of a planted run, 6-7.5 % of the spins had
 * been preempted (the kernel counted an involuntary switch during them) and read 1.4-1.6 times their ask: a mean of the
 * window (decision 132’s, each spin bounded at three times its expectation) hashed 3-4 % less, and the one before
 * it (no bound) hashed nothing for 1,236 spins after the one of 80 times. No clock, no I/O: the hook times the spins,
 * this only counts.
 */
export const RECENT = 16;

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
    const usPerBlock = median(this.usPerBlock);
    if (usPerBlock > 0) this.blocksPerUs = 1 / usPerBlock;
  }
}
