/**
 * Turns on the event loop for provisioning plans (docs/decisions/053). A plan is CPU work in many short steps whose
 * awaits resolve as microtasks, so it never gives the loop back by itself. Plans in flight take turns: one plan at a
 * time works, for a slice of `sliceMs`, then hands the loop back (setImmediate) so that I/O (every other request,
 * every webhook) is served before the next plan's slice. However many plans are in flight, one turn of the event
 * loop runs at most one slice of plan work, and plans are served round-robin in the order they asked.
 */
export class PlanTurns {
  /** True while a plan holds the turn, or the turn is being handed to the next plan. */
  private held = false;
  private readonly waiting: Array<() => void> = [];
  private sliceEnds = 0;

  constructor(
    private readonly options: {
      /** How long one plan works before it gives the loop back. */
      sliceMs: number;
      /** The clock slices are measured on (ms). */
      now: () => number;
      /** Schedules the hand-over to the next plan after pending I/O (setImmediate; tests hand over themselves). */
      defer: (handOver: () => void) => void;
    } = { sliceMs: 5, now: () => performance.now(), defer: (f) => setImmediate(f) },
  ) {}

  /** Waits until the loop is this plan's: at once when no plan holds it. */
  acquire(): Promise<void> {
    if (!this.held) {
      this.held = true;
      this.sliceEnds = this.options.now() + this.options.sliceMs;
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => this.waiting.push(resolve));
  }

  /**
   * Called by the plan holding the turn between two units of work: nothing (undefined) while its slice lasts, else it
   * queues behind the plans waiting and resolves when its next turn comes, after the loop has served I/O.
   */
  pause(): Promise<void> | undefined {
    if (this.options.now() < this.sliceEnds) return undefined;
    const next = new Promise<void>((resolve) => this.waiting.push(resolve));
    this.handOver();
    return next;
  }

  /** The plan holding the turn is done (answered or failed): the next one waiting gets it. */
  release(): void {
    this.handOver();
  }

  private handOver(): void {
    if (this.waiting.length === 0) {
      this.held = false;
      return;
    }
    // The turn stays held while it is handed over, so that a plan arriving meanwhile queues instead of running in the
    // same turn of the loop as the next one.
    this.options.defer(() => {
      const next = this.waiting.shift();
      if (!next) {
        this.held = false;
        return;
      }
      this.sliceEnds = this.options.now() + this.options.sliceMs;
      next();
    });
  }
}
