import { CircuitState, CountBreaker } from 'cockatiel';

import type { BreakerSettings } from '../config/index.js';

export type BreakerState = 'closed' | 'open' | 'half-open';

/** What the metrics and the start-up line learn of a breaker. */
export interface BreakerEvents {
  transition(upstream: string, from: BreakerState, to: BreakerState): void;
  shortCircuit(upstream: string): void;
}

/** What `pass` answers: the attempt goes out as usual, goes out as a half-open trial, or is refused. */
export const PASS = 0;
export const TRIAL = 1;
export const REFUSED = 2;
export type Passage = typeof PASS | typeof TRIAL | typeof REFUSED;

/**
 * One upstream's circuit breaker. Closed, every attempt goes out and its outcome enters a count-based rolling sample
 * (cockatiel's CountBreaker: the last `volume` outcomes); once the sample is full and more than `errorThreshold` of
 * it failed, the circuit opens. Open, every attempt is refused at once, for `resetTimeoutMs`. Then half-open: at
 * most `halfOpenAttempts` trial calls go out at once (any more are refused); the first failed trial opens the circuit
 * again for another `resetTimeoutMs`, and `halfOpenAttempts` successful trials in a row close it.
 *
 * Closed is the hot path: `pass` is one comparison and `record` one write into the sample. The clock is injected
 * (tests move it instead of waiting out the reset timeout); it is read only while the circuit is not closed.
 */
export class CircuitBreaker {
  private current: BreakerState = 'closed';
  private readonly sample: CountBreaker;
  private openedAt = 0;
  private trialsInFlight = 0;
  private trialSuccesses = 0;
  /** Attempts the upstream answered (a count only ever read against itself: see recordTimeout). */
  private answeredCount = 0;

  constructor(
    readonly upstream: string,
    readonly settings: BreakerSettings,
    private readonly events: BreakerEvents,
    private readonly now: () => number = Date.now,
  ) {
    this.sample = new CountBreaker({ threshold: settings.errorThreshold, size: settings.volume });
  }

  get state(): BreakerState {
    return this.current;
  }

  /** Seconds until an open circuit lets a trial through (at least 1); 1 while half-open with every trial slot taken. */
  retryAfterSeconds(): number {
    if (this.current !== 'open') return 1;
    return Math.max(1, Math.ceil((this.openedAt + this.settings.resetTimeoutMs - this.now()) / 1000));
  }

  /** How many attempts the upstream has answered so far: read when an attempt starts, for recordTimeout. */
  get answered(): number {
    return this.answeredCount;
  }

  /**
   * After an attempt that timed out: a failure only when the upstream answered nothing else while it was out
   * (`answeredAtStart`, read from `answered` when it started). A timeout while the upstream answered other calls says
   * something of that one request (one app's huge provisioning, a payload the upstream chews long), not of the
   * upstream's health, and one app's slow calls must not open the circuit for every app (docs/decisions/056).
   */
  recordTimeout(passage: Passage, answeredAtStart: number): void {
    this.record(passage, this.answeredCount > answeredAtStart ? null : true);
  }

  /** Before an attempt: whether it may go out. A refusal is counted as a short circuit. */
  pass(): Passage {
    if (this.current === 'closed') return PASS;
    if (this.current === 'open') {
      if (this.now() - this.openedAt < this.settings.resetTimeoutMs) return this.refuse();
      this.move('half-open');
      this.trialSuccesses = 0;
    }
    if (this.trialsInFlight >= this.settings.halfOpenAttempts) return this.refuse();
    this.trialsInFlight += 1;
    return TRIAL;
  }

  /**
   * After an attempt that `pass` let out: `true` when it failed in a way that says the upstream is unhealthy (a
   * transport error, a timeout, 502/503/504), `false` when the upstream answered, `null` when the answer says
   * nothing either way (429: the upstream is up and asks the caller to slow down).
   */
  record(passage: Passage, failed: boolean | null): void {
    if (failed === false) this.answeredCount += 1;
    if (passage === PASS) {
      // An attempt that went out closed may end after the circuit opened: it no longer counts.
      if (this.current !== 'closed' || failed === null) return;
      if (!failed) return this.sample.success(CircuitState.Closed);
      if (this.sample.failure(CircuitState.Closed)) this.open();
      return;
    }
    if (passage !== TRIAL) return;
    this.trialsInFlight -= 1;
    if (this.current !== 'half-open' || failed === null) return;
    if (failed) return this.open();
    this.trialSuccesses += 1;
    if (this.trialSuccesses >= this.settings.halfOpenAttempts) {
      this.sample.success(CircuitState.HalfOpen); // empties the sample: the closed circuit starts afresh
      this.move('closed');
    }
  }

  private refuse(): Passage {
    this.events.shortCircuit(this.upstream);
    return REFUSED;
  }

  private open(): void {
    this.openedAt = this.now();
    this.move('open');
  }

  private move(to: BreakerState): void {
    const from = this.current;
    if (from === to) return;
    this.current = to;
    this.events.transition(this.upstream, from, to);
  }
}
