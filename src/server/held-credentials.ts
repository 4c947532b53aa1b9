// What a credential holds open (a graphql-ws connection, an SSE subscription or reserved stream, an MCP request) is
// authenticated again after a reload (docs/decisions/057): one rule for the three transports, each ending what it holds
// in its own way.
import type { Caller } from '../auth/caller.js';
import type { Authenticate, AuthFailure } from '../auth/keys.js';
import { reauthenticatedFor } from '../auth/tenancy.js';
import type { Logger } from '../logger.js';

/** Something open on a credential, and how its transport ends it. */
export interface Holding {
  /** The Authorization header it was authenticated with, kept in memory to authenticate it again. */
  readonly authorization: string | undefined;
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
    while (this.held.has(holding)) {
      const checkedUnder = this.generation();
      const result = reauthenticatedFor(holding.caller, await this.authenticate(holding.authorization));
      if (checkedUnder !== this.generation() || !this.held.has(holding)) continue;
      if (!result.ok) {
        this.held.delete(holding);
        holding.refused(result);
        return null;
      }
      this.held.set(holding, checkedUnder);
      holding.admitted?.(result.caller);
      return result.caller;
    }
    return null;
  }

  /**
   * The credential authenticated under the running configuration. A check that throws (none does today: a JWT whose
   * keys cannot be fetched answers `unavailable`) fails closed, as that answer does: what it held ends, and it is logged.
   */
  private async authenticate(authorization: string | undefined) {
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
