import { hash, randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { CompiledQuery } from 'kysely';
import { parse as parseUuid, v5 as uuidv5 } from 'uuid';

import {
  ErrorCode,
  GatewayError,
  StoreUnavailableError,
  UpstreamAnswerIncompleteError,
  UpstreamOutcomeUnknownError,
  UpstreamRejectedError,
  type GatewayWarning,
  type IncompleteAnswer,
} from '../errors.js';
import { keyedFingerprint, sameRequest } from '../fingerprint.js';
import type { Logger, RequestLog } from '../logger.js';
import type { Metrics } from '../metrics.js';
import type { PauseAt } from '../phases.js';
import type { IdempotencyRecords } from '../store/idempotency.js';

/**
 * What every creation answers (mutations, provisionings, registrations): its result, the key it ran under, the key the
 * upstream got, and whether it was replayed; and the caveats for `extensions.warnings`, derived from the stored result
 * so that a replay carries them too.
 */
export interface Outcome<T> {
  readonly result: T;
  /** The caller's key, or a fresh UUIDv4 when none was given. */
  readonly idempotencyKey: string;
  /** The key sent upstream: `upstreamKey(scope, idempotencyKey)`. */
  readonly upstreamIdempotencyKey: string;
  readonly replayed: boolean;
  readonly warnings?: readonly GatewayWarning[];
}

export interface IdempotencyOptions {
  records: IdempotencyRecords;
  metrics: Metrics;
  retentionMs: number;
  /** The clock records expire and leases lapse by (tests move it instead of sleeping). Default Date.now. */
  now?: () => number;
  /** How long a second request with an in-flight key waits before IDEMPOTENCY_KEY_IN_USE. */
  waitMs: number;
  /**
   * How long a pending record belongs to its request without a renewal (IDEMPOTENCY_TAKEOVER). A running
   * call renews it every third of this, so only a call whose process died (or stalled for that long) lets a
   * later call with the same key, on any replica, take over.
   */
  leaseMs: number;
  /** Tests only (GATEWAY_TEST_PAUSE_AT): stops after the claim, before any upstream call. */
  pauseAt?: PauseAt;
  /** The lines of a call that names no request (`log` of `run`). */
  logger?: Logger;
  /** The gateway secret's keyed digest: request fingerprints are stored keyed (src/fingerprint.ts keyedFingerprint). */
  digest: (text: string) => string;
}

/** Namespace of the derived per-step keys of composite provisioning (UUIDv5 of key + step). */
const STEP_NAMESPACE = parseUuid('6f1c1f0e-8f3a-4c4e-9a59-2f8f3c1d7b21');

export function stepKey(key: string, step: string): string {
  return nameBasedUuid(`${key}/${step}`, STEP_NAMESPACE);
}

/** Namespace of the upstream Idempotency-Key (UUIDv5 of the caller's scope and key). */
const UPSTREAM_NAMESPACE = parseUuid('b3c1e0b4-6a43-5d0e-9f5a-2d7c4e8a1f60');

const ASCII = /^[\x00-\x7f]*$/;

/**
 * UUIDv5 (RFC 9562 §5.5) of `name` in `namespace`, the same as the uuid package's `v5`: SHA-1 of the namespace and
 * the name's UTF-8, version and variant bits set. node:crypto's SHA-1 costs a fifth of the uuid package's (which
 * re-encodes the name through encodeURIComponent), and every mutation derives a key. Names that are not ASCII go
 * to the uuid package, which also decides what a malformed one does.
 */
export function nameBasedUuid(name: string, namespace: Uint8Array): string {
  if (!ASCII.test(name)) return uuidv5(name, namespace);
  // One buffer through the one-shot hash: no Hash object (a stream) made per key.
  const input = Buffer.allocUnsafe(namespace.length + name.length);
  input.set(namespace, 0);
  input.write(name, namespace.length, 'latin1');
  // As hex text: `crypto.hash` gives a Buffer ~1 µs slower (decision 153). The version (5) is the 13th digit; the
  // variant (10) is the top two bits of the 17th.
  const hex = hash('sha1', input, 'hex');
  const variant = ((parseInt(hex[16]!, 16) & 0x3) | 0x8).toString(16);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-5${hex.slice(13, 16)}-${variant}${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}

/**
 * The `Idempotency-Key` sent upstream for a caller's key (docs/contract.md, Idempotency): records are kept per
 * (scope, key), so the upstream must see a key that differs per scope too, or two apps that pick the same
 * key would get each other's resource replayed (or be refused). Deterministic, so a retry, a replay after a
 * restart and another replica all send the same key.
 */
export function upstreamKey(scope: string, key: string): string {
  return nameBasedUuid(`${scope}\u0000${key}`, UPSTREAM_NAMESPACE);
}

/** UPSTREAM_OUTCOME_UNKNOWN from what `park` stored for an unknown outcome, for a call that waited on the one that failed. */
function unknownOutcome(stored: unknown, key: string, upstream: string): UpstreamOutcomeUnknownError {
  const s = (stored ?? {}) as { upstream?: string; reason?: string; attempts?: number; status?: number | null };
  return new UpstreamOutcomeUnknownError(
    s.upstream ?? 'the upstream',
    s.reason ?? 'outcome unknown',
    s.attempts ?? 1,
    s.status ?? undefined,
    {
      idempotencyKey: key,
      upstreamIdempotencyKey: upstream,
    },
  );
}

/** UPSTREAM_ANSWER_INCOMPLETE from the answer `park` kept. */
function incompleteAnswer(stored: unknown, key: string, upstream: string): UpstreamAnswerIncompleteError {
  return new UpstreamAnswerIncompleteError(stored as IncompleteAnswer, {
    idempotencyKey: key,
    upstreamIdempotencyKey: upstream,
  });
}

/**
 * Whether a failed call of an upstream that honours the key may have reached it: UPSTREAM_UNAVAILABLE once its retries
 * ran out (or its circuit opened after an attempt), but not a circuit that refused it before any (`sent: false`); a
 * refusal of a repeated attempt whose earlier one may have been applied. An upstream not known to honour the key
 * (`unrepeatable`) answers UPSTREAM_OUTCOME_UNKNOWN instead when it may have.
 */
function mayHaveReached(error: unknown, unrepeatable: string | undefined): boolean {
  if (unrepeatable !== undefined) return false;
  // A refusal of a repeated attempt whose earlier one may have been applied: the key stays bound to the request.
  if (error instanceof UpstreamRejectedError) return error.mayHaveApplied;
  return (
    error instanceof GatewayError &&
    error.extensions.code === ErrorCode.UPSTREAM_UNAVAILABLE &&
    error.extensions.sent !== false
  );
}

/** How many lost calls (Idempotency's `lost`) a process remembers. */
const LOST_CALLS_KEPT = 10_000;

/**
 * The idempotency rules of docs/contract.md, per (caller scope, key):
 * - done with the same fingerprint: the stored result, replayed, no upstream call;
 * - any record with another fingerprint: IDEMPOTENCY_KEY_REUSED;
 * - pending: wait (bounded) for it to finish, then replay or IDEMPOTENCY_KEY_IN_USE;
 * - a failure that may have reached an upstream that honours the key (UPSTREAM_UNAVAILABLE) ends the lease but keeps
 *   the key bound to its request: the next call of that request re-sends the same key upstream, another request is
 *   IDEMPOTENCY_KEY_REUSED;
 * - any other failure releases the key, except on an upstream not known to honour the key (`unrepeatable`) once it
 *   answered: the key stays pending and the call that takes it over answers UPSTREAM_OUTCOME_UNKNOWN, as after a
 *   replica that died mid-call;
 * - an unknown outcome (UPSTREAM_OUTCOME_UNKNOWN) keeps the key bound to its request: the next call with it
 *   is the app's explicit decision to send it again (docs/decisions/011);
 * - a 2xx whose answer cannot be read (UPSTREAM_ANSWER_INCOMPLETE) keeps the key and the answer: the next call with
 *   it reads the kept answer again (`recover`, with the paths configured now) and never sends the request again
 *   (docs/decisions/042).
 * In-process waiters are woken at once; across processes they poll the store.
 */
export class Idempotency {
  /**
   * One entry per mutation in flight in this process, removed when it settles, and emptied first: a `Map` that
   * rebuilds its table leaves the old one, with the entries it had then, in the old generation until a mark-compact,
   * and a call's promise held there would keep its whole result alive through every scavenge (docs/decisions/123).
   */
  private readonly inFlight = new Map<string, { running: Promise<unknown> | undefined }>();
  /**
   * Calls of this process that ended while the database was away, so that their pending record could be neither
   * completed nor released: the leases each may have left on it. A retry here takes the key over at once when the
   * record still holds one of them (nobody took it over meanwhile), instead of waiting for the lease to run out.
   */
  private readonly lost = new Map<string, readonly number[]>();

  constructor(private readonly options: IdempotencyOptions) {}

  async run<T>(params: {
    scope: string;
    key: string | null | undefined;
    operation: string;
    /** The canonical upstream request (secrets included: only its hash is stored). */
    request: unknown;
    /**
     * Runs the upstream call with the derived upstream key; calls `answered` once the upstream has answered (it may
     * have created something), before the writes that store its answer. `sentBefore`: an earlier call with this key
     * may have sent the request (its outcome was unknown, or its lease lapsed), so this send may be a repeat of one
     * the upstream applied.
     */
    execute: (upstreamIdempotencyKey: string, answered: () => void, sentBefore: boolean) => Promise<T>;
    /**
     * The upstream's name when it is not known to honour Idempotency-Key (identity, unless IDEMPOTENT_UPSTREAMS names
     * it); absent for the cloud API. Then nothing sends the request again on its own once it may have arrived: a call
     * that failed after the upstream answered keeps its key pending (never released) and answers
     * UPSTREAM_OUTCOME_UNKNOWN, and a call that takes a pending record over (its lease lapsed: a replica died mid-call,
     * or a call's end could not be stored) parks it as unknown and answers UPSTREAM_OUTCOME_UNKNOWN instead of sending.
     */
    unrepeatable?: string;
    /** What is stored for replay; defaults to the result. Must hold no secret. */
    toStored?: (result: T) => unknown;
    /** The result again from what `toStored` kept, for a replay (a promise when it reads the store). */
    fromStored?: (stored: unknown) => T | Promise<T>;
    /**
     * Writes that store the result (the ledger record of a created resource): committed in one transaction with
     * the completion of the key, so that a crash leaves both or neither, and a first call costs one commit less.
     */
    storeWith?: (result: T) => readonly CompiledQuery[];
    /**
     * The error to answer when a write of `storeWith` changed no row, so that nothing was stored (the ledger holds the
     * created id for another creation). An UpstreamAnswerIncompleteError keeps the answer with the key, as any other.
     */
    unstorable?: (result: T) => Error;
    /**
     * Reads the answer kept by an earlier UPSTREAM_ANSWER_INCOMPLETE again, with the upstream key it was created
     * under: the result, or UpstreamAnswerIncompleteError once more. Without it, such a retry replays the error.
     */
    recover?: (incomplete: IncompleteAnswer, upstreamIdempotencyKey: string) => T | Promise<T>;
    /**
     * The request this call serves: what the call logs (its lease's renewals refused or failing, its end not stored)
     * names its request id. None: the runner's own logger.
     */
    log?: RequestLog | undefined;
  }): Promise<Outcome<T>> {
    const { records, metrics } = this.options;
    const key = params.key ?? randomUUID();
    const upstream = upstreamKey(params.scope, key);
    const fingerprinted = { operation: params.operation, request: params.request };
    const print = keyedFingerprint(this.options.digest, fingerprinted);
    const deadline = Date.now() + this.options.waitMs;
    const slot = `${params.scope}\u0000${key}`;
    /** Set once this call has waited for another one with the same key. */
    let waited = false;
    let retryOfUnknown = false;
    /** The kept answer this call reads again instead of calling the upstream. */
    let recovering: IncompleteAnswer | null = null;
    /** The lease this call's claim wrote. */
    let claimedLease = 0;
    /** Set when this call took over a pending record whose call may have sent the request. */
    let tookOver = false;

    for (;;) {
      const now = this.options.now?.() ?? Date.now();
      const claim = {
        scope: params.scope,
        key,
        operation: params.operation,
        fingerprint: print,
        leaseUntil: now + this.options.leaseMs,
        expiresAt: now + this.options.retentionMs,
      };
      claimedLease = claim.leaseUntil;
      // Claim first: a fresh key (the common case, and always when the caller gives none) costs one
      // statement; only a key that is taken is read back.
      if (await records.claimFree(claim, now)) break;
      const existing = await records.get(params.scope, key, now);
      if (existing) {
        if (!sameRequest(existing.fingerprint, print, fingerprinted) || existing.operation !== params.operation) {
          throw new GatewayError(
            ErrorCode.IDEMPOTENCY_KEY_REUSED,
            `idempotency key ${key} was already used for a different request (${existing.operation}); use a new key for a new request`,
            { idempotencyKey: key },
          );
        }
        // Taken as it is stored: a record written before fingerprints were keyed holds the unsalted one, and a claim
        // with the keyed one would match no row (a retry of its unknown outcome then asked again without end).
        const same = existing.fingerprint === print ? claim : { ...claim, fingerprint: existing.fingerprint };
        if (existing.state === 'done') {
          metrics.idempotentReplays.inc({ operation: params.operation });
          const stored = existing.response;
          return {
            result: params.fromStored ? await params.fromStored(stored) : (stored as T),
            idempotencyKey: key,
            upstreamIdempotencyKey: upstream,
            replayed: true,
          };
        }
        if (existing.state === 'unknown') {
          // A call that was already waiting when the first one ended shares its answer: only a call made
          // after the app learnt of the unknown outcome is the app's decision to send it again.
          if (waited) throw unknownOutcome(existing.response, key, upstream);
          if (await records.reclaim(same, 'unknown', now)) {
            retryOfUnknown = true;
            break;
          }
          continue;
        }
        if (existing.state === 'incomplete') {
          // The upstream created it: only its kept answer is read again, never the request re-sent.
          if (waited || !params.recover) throw incompleteAnswer(existing.response, key, upstream);
          if (await records.reclaim(same, 'incomplete', now)) {
            recovering = existing.response as IncompleteAnswer;
            break;
          }
          continue;
        }
        const lost = this.lost.get(slot);
        if (lost && !this.inFlight.has(slot) && existing.state === 'pending') {
          this.lost.delete(slot);
          if (await records.takeOverLost(same, lost)) {
            tookOver = true;
            break;
          }
        }
        if (await records.takeOver(same, now)) {
          tookOver = true;
          break;
        }
      } else if (Date.now() < deadline) {
        // Released or expired between the two statements: it is free now.
        continue;
      }
      if (Date.now() >= deadline) {
        throw new GatewayError(
          ErrorCode.IDEMPOTENCY_KEY_IN_USE,
          `a request with idempotency key ${key} is still in progress; retry later with the same key`,
          { idempotencyKey: key },
        );
      }
      waited = true;
      const running = this.inFlight.get(slot)?.running;
      if (running) {
        await Promise.race([running.catch(() => undefined), sleep(Math.max(0, deadline - Date.now()))]);
      } else {
        await sleep(Math.min(50, Math.max(0, deadline - Date.now())));
      }
    }

    if (tookOver && params.unrepeatable !== undefined) {
      // The call that held the key may have sent the request (its process died mid-call, or the store failed after
      // the upstream answered): the outcome is unknown, and parked so that the app's next call is its decision.
      const unknown = {
        upstream: params.unrepeatable,
        reason: 'an earlier call with this key may have sent it, and its outcome was not stored',
        attempts: 1,
        status: null,
      };
      // Not parked when another call took the record over meanwhile: this call sent nothing, all the same.
      await records.park(params.scope, key, [claimedLease], 'unknown', unknown, this.expiry());
      throw unknownOutcome(unknown, key, upstream);
    }

    /** Set once the upstream answered this call (see `execute`). */
    let answered = false;
    const markAnswered = () => {
      answered = true;
    };
    const work = (async () => {
      // Every lease this call may have left on its record: its end applies only while the record holds one of them.
      const leases = [claimedLease];
      const stopRenewing = this.renewWhileRunning(params.scope, key, print, leases, params.log);
      try {
        if (this.options.pauseAt) await this.options.pauseAt('mutation-claimed');
        const result = recovering
          ? await params.recover!(recovering, upstream)
          : await params.execute(upstream, markAnswered, retryOfUnknown || tookOver);
        if (!recovering) answered = true;
        const stored = params.toStored ? params.toStored(result) : result;
        // Not stored when another call took the record over: this answer came under the same upstream key, so it is
        // the caller's all the same, and the record (with the ledger's copy) is the other call's to write.
        const completed = await records.complete(
          params.scope,
          key,
          stored,
          this.expiry(),
          leases,
          params.storeWith?.(result),
        );
        if (completed === false) this.lostRecord(key, params.operation, params.log);
        else if (completed !== true)
          throw params.unstorable?.(result) ?? new Error(`the result of ${params.operation} could not be stored`);
        return result;
      } catch (error) {
        if (error instanceof UpstreamOutcomeUnknownError) {
          // Kept, not released: the key stays bound to this request, and the app decides whether to retry.
          const unknown = {
            upstream: error.upstream,
            reason: error.reason,
            attempts: error.attempts,
            status: error.status ?? null,
          };
          if (!(await records.park(params.scope, key, leases, 'unknown', unknown, this.expiry())))
            this.lostRecord(key, params.operation, params.log);
          throw error.withKeys(key, upstream);
        }
        if (error instanceof UpstreamAnswerIncompleteError) {
          // Kept, not released: the resource exists upstream, and its answer is what a later call reads again.
          if (!recovering) metrics.upstreamAnswersIncomplete.inc({ operation: params.operation });
          if (!(await records.park(params.scope, key, leases, 'incomplete', error.incomplete, this.expiry())))
            this.lostRecord(key, params.operation, params.log);
          throw error.withKeys(key, upstream);
        }
        if (answered && params.unrepeatable !== undefined) {
          // The upstream answered (it may have created the resource), and its answer could not be stored. Released,
          // the key would let a retry send it a second time: it stays pending, with no write (the store may be
          // down), and the call that takes it over (at once on this process, after the lease elsewhere) answers
          // UPSTREAM_OUTCOME_UNKNOWN.
          this.loggerOf(params.log)?.warn(
            { err: error, idempotencyKey: key, operation: params.operation },
            'the upstream answered but its answer could not be stored; the key stays pending, not released',
          );
          this.keepLost(slot, leases);
          throw new UpstreamOutcomeUnknownError(
            params.unrepeatable,
            'it answered, but the gateway could not store its answer',
            1,
            undefined,
            { idempotencyKey: key, upstreamIdempotencyKey: upstream },
          );
        }
        if (recovering) {
          // Reading the kept answer failed otherwise (the store): it stays kept, never released.
          if (!(await records.park(params.scope, key, leases, 'incomplete', recovering, this.expiry())))
            this.lostRecord(key, params.operation, params.log);
          throw error;
        }
        try {
          // The upstream may have created it under the upstream key (an answer lost, a timeout, a 5xx): the key stays
          // bound to this request, free for its next call, which sends the same key again; another request with it is
          // IDEMPOTENCY_KEY_REUSED, never sent under that key. Only a call that cannot have reached the upstream (its
          // circuit open before any attempt, `sent: false`), or one it refused, gives the key back.
          const ended = mayHaveReached(error, params.unrepeatable)
            ? await records.lapse(params.scope, key, leases, this.expiry())
            : await records.release(params.scope, key, leases);
          if (!ended) this.lostRecord(key, params.operation, params.log);
        } catch (releaseError) {
          if (releaseError instanceof StoreUnavailableError) this.keepLost(slot, leases);
          throw releaseError;
        }
        throw error;
      } finally {
        stopRenewing();
      }
    })();
    if (retryOfUnknown) metrics.idempotentRetriesOfUnknown.inc({ operation: params.operation });
    const entry: { running: Promise<unknown> | undefined } = { running: work };
    this.inFlight.set(slot, entry);
    try {
      // A result read from a kept answer is a replay too: this call sent nothing upstream.
      return {
        result: await work,
        idempotencyKey: key,
        upstreamIdempotencyKey: upstream,
        replayed: recovering !== null,
      };
    } finally {
      entry.running = undefined;
      // A call that took this one's key over (its lease lapsed) runs under the same slot: its entry stays.
      if (this.inFlight.get(slot) === entry) this.inFlight.delete(slot);
    }
  }

  /**
   * Binds the caller's key to a creation that keeps its own state (a composite provisioning), so that one key names one
   * creation: IDEMPOTENCY_KEY_REUSED when another creation (or another request) holds it; nothing when this one does.
   */
  async bind(params: { scope: string; key: string; operation: string; request: unknown }): Promise<void> {
    const { records } = this.options;
    const now = this.options.now?.() ?? Date.now();
    const print = keyedFingerprint(this.options.digest, { operation: params.operation, request: params.request });
    const claim = {
      scope: params.scope,
      key: params.key,
      operation: params.operation,
      fingerprint: print,
      leaseUntil: 0,
      expiresAt: now + this.options.retentionMs,
    };
    if (await records.bind(claim, now)) return;
    const reused = await this.heldByAnother(params, print, now);
    if (reused) throw reused;
  }

  /**
   * What `bind` would refuse, read without binding (a plan shows what its run would be answered): IDEMPOTENCY_KEY_REUSED
   * when another creation (or another request) holds the caller's key, else null.
   */
  async reusedBy(params: {
    scope: string;
    key: string;
    operation: string;
    request: unknown;
  }): Promise<GatewayError | null> {
    const print = keyedFingerprint(this.options.digest, { operation: params.operation, request: params.request });
    return this.heldByAnother(params, print, this.options.now?.() ?? Date.now());
  }

  private async heldByAnother(
    params: { scope: string; key: string; operation: string; request: unknown },
    print: string,
    now: number,
  ): Promise<GatewayError | null> {
    const existing = await this.options.records.get(params.scope, params.key, now);
    const fingerprinted = { operation: params.operation, request: params.request };
    if (
      existing &&
      (existing.operation !== params.operation || !sameRequest(existing.fingerprint, print, fingerprinted))
    )
      return new GatewayError(
        ErrorCode.IDEMPOTENCY_KEY_REUSED,
        `idempotency key ${params.key} was already used for a different request (${existing.operation}); use a new key for a new request`,
        { idempotencyKey: params.key },
      );
    return null;
  }

  /**
   * When the record of a call that ends now expires: IDEMPOTENCY_RETENTION counts from the call's end too, so that an
   * answer stored (or kept) after a call that outlived the retention of its claim is replayed (or read again), and a
   * key the upstream may have seen stays bound to its request.
   */
  private expiry(): number {
    return (this.options.now?.() ?? Date.now()) + this.options.retentionMs;
  }

  /** Remembers the leases a call that ended without its end stored may have left on its pending record (`lost`). */
  private keepLost(slot: string, leases: readonly number[]): void {
    // Bounded: past the bound the oldest is forgotten, and its key waits for its lease as any other.
    if (this.lost.size >= LOST_CALLS_KEPT) this.lost.delete(this.lost.keys().next().value!);
    this.lost.set(slot, [...leases]);
  }

  /** What writes the lines of a call that serves `log`'s request (read only now: see RequestLog); else the runner's. */
  private loggerOf(log: RequestLog | undefined): Logger | undefined {
    return log?.logger ?? this.options.logger;
  }

  /** A call's end that was not stored: its record holds none of the call's leases any more. */
  private lostRecord(key: string, operation: string, log: RequestLog | undefined): void {
    this.loggerOf(log)?.warn(
      { idempotencyKey: key, operation },
      'the call ran on after its idempotency lease lapsed and another call took its key over: the end of this call ' +
        "is not stored, the record is the other call's",
    );
  }

  /**
   * Renews the lease every third of it while the call runs (docs/decisions/012): a replica that crashed
   * stops renewing, and its key can be taken over once the lease runs out, at most `leaseMs` after the
   * crash; a call that is alive but slow keeps its key however long its upstream takes.
   */
  private renewWhileRunning(
    scope: string,
    key: string,
    print: string,
    leases: number[],
    log: RequestLog | undefined,
  ): () => void {
    const { records, leaseMs } = this.options;
    // The renewals run one after another; the chain starts at the first (most calls end before it: no promise made).
    let renewing: Promise<void> | undefined;
    let stopped = false;
    const timer = setInterval(
      () => {
        renewing = (renewing ?? Promise.resolve()).then(async () => {
          if (stopped) return;
          try {
            const now = this.options.now?.() ?? Date.now();
            const held = [...leases];
            // Every lease this call may have left on its record (a renewal whose answer was lost may have been applied).
            leases.push(now + leaseMs);
            const renewed = await records.renew(scope, key, print, now + leaseMs, held, now);
            // Applied: the record holds this lease, none of the earlier ones. Refused: it never held this one.
            if (renewed) leases.splice(0, leases.length - 1);
            else leases.pop();
            if (!renewed && !stopped) {
              this.loggerOf(log)?.warn(
                { idempotencyKey: key },
                'idempotency lease could not be renewed: the call ran on after its lease lapsed',
              );
            }
          } catch (err) {
            this.loggerOf(log)?.warn(
              { err, idempotencyKey: key },
              'idempotency lease renewal failed; retrying at the next interval',
            );
          }
        });
      },
      Math.max(10, Math.floor(leaseMs / 3)),
    );
    timer.unref();
    return () => {
      stopped = true;
      clearInterval(timer);
    };
  }
}
