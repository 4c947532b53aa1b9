// What a credential holds open (a graphql-ws connection, an SSE subscription or reserved stream, an MCP request) is
// authenticated again after a reload (docs/decisions/057): one rule for the three transports, each ending what it holds
// in its own way. While a credential is authenticated again, what it holds delivers nothing (Delivery, below).
import type { Caller } from '../auth/caller.js';
import type { Authenticate, AuthFailure } from '../auth/keys.js';
import { reauthenticatedFor } from '../auth/tenancy.js';
import type { DeliveryGate } from '../execution/present.js';
import type { Logger } from '../logger.js';

/**
 * Whether what a credential holds may deliver now. While a reload's check of the credential is pending (a JWT whose
 * keys are being fetched), it is held: an event waits, in order, where it is (a subscription's stream asks its source
 * for nothing more; an MCP listen or wait keeps what it found), for the credential to be admitted again (`resume`); a
 * credential refused (`refuse`) stays held, and what waits is never sent: what it holds ends as it always did. The
 * transports read `held`, one boolean per event; only HeldCredentials holds, resumes and refuses.
 */
export class Delivery implements DeliveryGate {
  /** True while a check of the credential is pending, and for good once one refused it. */
  held = false;
  /** The checks pending (two reloads in a row, a graphql-ws subscribe's own check beside a reload's). */
  private checks = 0;
  private refused = false;
  private resumed: (() => void)[] | null = null;
  /** What is held whenever this is (see `lead`). */
  private followers: Set<Delivery> | null = null;

  /**
   * `follower` is held whenever this is, besides its own checks: an SSE subscription on a reserved stream, while the
   * credential that connected the stream is checked. Returns the function that ends it.
   */
  lead(follower: Delivery): () => void {
    (this.followers ??= new Set()).add(follower);
    if (this.checks > 0) follower.hold();
    return () => {
      if (this.followers?.delete(follower) && this.checks > 0) follower.resume();
    };
  }

  /** Runs `resume` once nothing is held back any more: at once when nothing is, never when the credential is refused. */
  whenResumed(resume: () => void): void {
    if (!this.held) return resume();
    if (!this.refused) (this.resumed ??= []).push(resume);
  }

  /** @internal HeldCredentials: a check of the credential begins. */
  hold(): void {
    this.checks += 1;
    this.held = true;
    if (this.followers !== null) for (const follower of this.followers) follower.hold();
  }

  /** @internal HeldCredentials: a check ended with the credential admitted (or no longer held). */
  resume(): void {
    if (this.checks === 0) return;
    this.checks -= 1;
    if (this.followers !== null) for (const follower of [...this.followers]) follower.resume();
    if (this.checks > 0 || this.refused) return;
    this.held = false;
    const resumed = this.resumed;
    this.resumed = null;
    for (const resume of resumed ?? []) resume();
  }

  /** @internal HeldCredentials: the credential is refused; what waits is dropped, and nothing is delivered again. */
  refuse(): void {
    this.refused = true;
    this.held = true;
    this.resumed = null;
  }
}

/** Something open on a credential, and how its transport ends it. */
export interface Holding {
  /** Whether what it holds may deliver now (held while its credential is checked again). */
  readonly delivery: Delivery;
  /** The Authorization header it was authenticated with, kept in memory to authenticate it again. */
  readonly authorization: Parameters<Authenticate>[0];
  /**
   * Who opened it. What it reads is that app's: a reload that makes the credential another app's refuses it
   * (src/auth/tenancy.ts reauthenticatedFor).
   */
  readonly caller: Caller;
  /**
   * The running configuration refuses the credential, or cannot check it now (`reason` 'unavailable': a JWT whose
   * keys cannot be fetched): it is no longer held, and ends.
   */
  refused(failure: AuthFailure): void;
  /**
   * The running configuration admits the credential as `caller`: what needs a scope the caller lost ends (a
   * subscription) or goes quiet (a listened resource).
   */
  admitted?(caller: Caller): void;
}

const UNCHECKED: AuthFailure = Object.freeze({
  ok: false,
  reason: 'unavailable',
  message: 'the credential could not be authenticated again after a reload: connect again',
});

export class HeldCredentials {
  /** Each holding, and the configuration's generation its credential was last authenticated under. */
  private readonly held = new Map<Holding, number>();

  constructor(
    private readonly options: {
      authenticate: Authenticate;
      /** The running configuration's generation: one more after each reload. */
      generation: () => number;
      logger: Logger;
    },
  ) {}

  /** The running configuration's generation, to take before a credential is checked (see `hold`). */
  generation(): number {
    return this.options.generation();
  }

  /**
   * Holds what was opened with a credential checked under `checkedUnder`. A JWT's verification awaits its keys, and a
   * reload meanwhile must not pass the old configuration's answer off as the new one's: it is checked again at once.
   */
  hold(holding: Holding, checkedUnder: number): void {
    this.held.set(holding, checkedUnder);
    if (checkedUnder !== this.generation()) this.recheckLater(holding);
  }

  /** It closed or ended: no longer authenticated again. False when it was not held (a refusal ended it already). */
  release(holding: Holding): boolean {
    return this.held.delete(holding);
  }

  /** Held, and authenticated under an earlier configuration than the running one. */
  stale(holding: Holding): boolean {
    const checkedUnder = this.held.get(holding);
    return checkedUnder !== undefined && checkedUnder !== this.generation();
  }

  /**
   * Authenticates a holding's credential again, under the running configuration: its caller now (`admitted` has run),
   * or null (refused and ended, or no longer held). An answer given while a reload happened is not the running
   * configuration's: the credential is checked again.
   */
  async recheck(holding: Holding): Promise<Caller | null> {
    // Held from the first moment (the reload's own turn, before any event can be handed on), until the answer is in:
    // nothing reaches a credential the running configuration may refuse. `admitted` first (a subscription that lost
    // its scope ends before it would get what waited); a refused credential's streams end with nothing of it sent.
    const delivery = holding.delivery;
    delivery.hold();
    try {
      while (this.held.has(holding)) {
        const checkedUnder = this.generation();
        const result = reauthenticatedFor(holding.caller, await this.authenticate(holding.authorization));
        if (checkedUnder !== this.generation() || !this.held.has(holding)) continue;
        if (!result.ok) {
          this.held.delete(holding);
          delivery.refuse();
          holding.refused(result);
          return null;
        }
        this.held.set(holding, checkedUnder);
        holding.admitted?.(result.caller);
        return result.caller;
      }
      return null;
    } finally {
      delivery.resume();
    }
  }

  /**
   * The credential authenticated under the running configuration. A check that throws (none does today: a JWT whose
   * keys cannot be fetched answers `unavailable`) fails closed, as that answer does: what it held ends, and it is logged.
   */
  private async authenticate(authorization: Parameters<Authenticate>[0]) {
    try {
      return await this.options.authenticate(authorization);
    } catch (err) {
      this.options.logger.error({ err }, 'a credential held open could not be authenticated again: what it held ends');
      return UNCHECKED;
    }
  }

  /** After a reload: everything held is authenticated again. */
  recheckAll(): void {
    for (const holding of [...this.held.keys()]) this.recheckLater(holding);
  }

  private recheckLater(holding: Holding): void {
    // `refused` and `admitted` are the transports' own: one that throws is logged, the others still rechecked.
    this.recheck(holding).catch((err: unknown) =>
      this.options.logger.warn({ err }, 'what a credential holds open could not be authenticated again after a reload'),
    );
  }
}
