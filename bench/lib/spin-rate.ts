/**
 * How many blocks the guard's planted spin (bench/lib/guard-hooks.ts) hashes for an ask of so many µs: the blocks a µs
 * of its last RECENT spins together, each timed after the fact on the process's clock, so that the spins spend their
 * asks on average and another thread's work in one of them moves the next ones little. No clock, no I/O: the hook
 * times the spins, this only counts.
 */
export const RECENT = 16;

/**
 * A spin's time counts at most this many times what the blocks a µs said it would take: on the one core the guard
 * pins a gateway to, another thread's burst (V8's helpers, the checkpoint worker) that preempts a spin is counted in
 * it, and one such spin read 80 times its ask (3,205 µs for 40). Counted whole, it shrank the next spins to one block,
 * then to none, and spins of no block were not timed, so it stayed in the window for the process's life: that gateway
 * hashed nothing for its next 1,236 spins, and its pair read the plant at 0.97–1.02 on the intake and the delivery,
 * the other pairs 1.05–1.11 (decision 132). Every spin now hashes at least one block.
 */
export const DISTURBED = 3;

export class SpinRate {
  private readonly blocks: number[] = [];
  private readonly us: number[] = [];
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

  /** Counts a spin of `blocks` blocks that took `us` µs of the process's CPU. */
  record(blocks: number, us: number): void {
    this.blocks[this.next] = blocks;
    this.us[this.next] = Math.min(us, (DISTURBED * blocks) / this.blocksPerUs);
    this.next = (this.next + 1) % RECENT;
    const spent = sum(this.us);
    if (spent > 0) this.blocksPerUs = sum(this.blocks) / spent;
  }
}

const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);
